"""The progress bar of available-now runs and the terminal it shares with the batch lines."""

from __future__ import annotations

import io

import pytest

from persistent.runtime.progress import ProgressBar, Terminal

from persistent.sources.base import Backlog


class TTY(io.StringIO):
    def isatty(self):
        return True


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


FILES = Backlog("files", begin=0, end=10, unit="files")


def bar_over(backlog: Backlog = FILES) -> tuple[ProgressBar, io.StringIO, Clock]:
    """A bar over ``backlog`` writing to a log-like stream, and its clock."""
    out, clock = io.StringIO(), Clock()
    return ProgressBar(backlog, Terminal(out), clock), out, clock


@pytest.mark.parametrize(
    "offset, position",
    [('{"files": 4}', 4), ('{"index": 4}', None), ("null", None), (None, None), ("not json", None), ("[4]", None),
     ('{"files": "4"}', None)],
)
def test_a_position_is_the_integer_at_the_backlogs_field_of_an_offset(offset, position):
    assert FILES.position(offset) == position


def test_the_bar_counts_source_positions_with_the_rate_and_time_left_of_the_batches_after_the_first():
    bar, out, clock = bar_over()
    clock.now += 2
    bar.update("null", '{"files": 3}')
    clock.now += 2
    bar.update('{"files": 3}', '{"files": 7}')
    clock.now += 1
    bar.update('{"files": 7}', '{"files": 10}')
    assert out.getvalue().splitlines() == [
        "[#########.....................] 3/10 files  30%",
        "[#####################.........] 7/10 files  70%  2.0 files/s  2 s left",
        "[##############################] 10/10 files 100%  2.3 files/s",
    ]


def test_sparks_start_up_before_the_first_batch_does_not_count_in_the_time_left():
    bar, out, clock = bar_over(Backlog("files", begin=0, end=40, unit="files"))
    clock.now += 60  # the JVM, the session, the query's first plan
    bar.update("null", '{"files": 1}')
    for files in range(2, 5):
        clock.now += 5
        bar.update(f'{{"files": {files - 1}}}', f'{{"files": {files}}}')
    assert out.getvalue().splitlines()[-1].endswith("4/40 files  10%  0.2 files/s  3 min 00 s left")


def test_a_restarted_run_counts_from_where_its_first_batch_started():
    bar, out, clock = bar_over(Backlog("index", begin=0, end=1_000, unit="messages"))
    clock.now += 1
    bar.update('{"index": 600}', '{"index": 800}')
    clock.now += 1
    bar.update('{"index": 800}', '{"index": 900}')
    assert out.getvalue().splitlines() == [
        "[###############...............] 200/400 messages  50%",
        "[######################........] 300/400 messages  75%  100 messages/s  1 s left",
    ]


def test_a_run_restarted_from_the_first_position_counts_all_of_it():
    bar, out, _ = bar_over(Backlog("files", begin=2, end=4, unit="files"))
    bar.update('{"files": 0}', '{"files": 1}')
    assert "] 1/4 files  25%" in out.getvalue()


def test_input_arriving_after_the_start_extends_the_total():
    bar, out, _ = bar_over()
    bar.update("null", '{"files": 12}')
    assert "12/12 files 100%" in out.getvalue()


def test_offsets_without_a_position_leave_the_bar_alone():
    bar, out, _ = bar_over()
    bar.update("null", '{"other": 1}')
    assert out.getvalue() == ""


def test_the_bar_changes_only_when_the_source_has_read_more():
    bar, out, clock = bar_over()
    bar.update("null", '{"files": 1}')
    clock.now += 1
    bar.update('{"files": 1}', '{"files": 5}')
    clock.now += 1
    bar.update('{"files": 5}', '{"files": 5}')
    assert out.getvalue().splitlines()[1:] == ["[###############...............] 5/10 files  50%  4.0 files/s  1 s left"]


def test_long_waits_read_in_minutes_and_hours():
    bar, out, clock = bar_over(Backlog("index", 0, 10_000, "messages"))
    bar.update("null", '{"index": 1}')
    clock.now += 100
    bar.update("null", '{"index": 2}')
    assert out.getvalue().endswith("0.01 messages/s  277 h 43 min left\n")
    clock.now += 1
    bar.update("null", '{"index": 5001}')
    assert out.getvalue().endswith("49.5 messages/s  1 min 41 s left\n")


def test_on_a_terminal_lines_go_above_the_bar_which_is_redrawn_in_place():
    out = TTY()
    terminal = Terminal(out)
    terminal.line("batch 0.0")
    terminal.bar("[#.] 1/2")
    terminal.line("batch 0.1")
    terminal.bar("[##] 2/2")
    terminal.end_bar()
    terminal.line("done")
    assert out.getvalue() == (
        "batch 0.0\n"
        "\r\x1b[K[#.] 1/2"
        "\r\x1b[Kbatch 0.1\n[#.] 1/2"
        "\r\x1b[K[##] 2/2"
        "\n"
        "done\n"
    )


def test_in_a_log_file_each_state_of_the_bar_is_a_line():
    out = io.StringIO()
    terminal = Terminal(out)
    terminal.bar("[#.] 1/2")
    terminal.line("batch 0.1")
    terminal.end_bar()
    assert out.getvalue() == "[#.] 1/2\nbatch 0.1\n"


def test_the_terminal_writes_to_the_current_standard_error(capsys):
    Terminal().line("to stderr")
    assert capsys.readouterr().err == "to stderr\n"
