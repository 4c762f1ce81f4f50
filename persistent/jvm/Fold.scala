// Spark's half of the fold before the shuffle (persistent/runtime/fold.py).
//
// The key groups' operator (applyInPandasWithState) shuffles every message to its key
// group. A monoid's plus is associative, so a task whose messages are monoid values
// Spark can compute (persistent.core.task.MonoidTask) can fold them per key group, key
// and checkpoint interval (or window pane) in the task that reads them, before the
// shuffle, as Spark's own partial aggregation does: only the partial values cross it.
// Spark's DataFrame API has no aggregation within a partition (a streaming one keeps
// state and must be the query's last), so this file adds one: `PartialFold`, which
// Spark plans as its HashAggregateExec in partial mode with no shuffle before or after it.
//
// Which messages fold depends on the micro-batch's watermark (a late message is output
// or counted one by one), which Spark keeps on the driver: the driver puts it in a local
// property of the micro-batch's jobs, and `BatchWatermark` reads it in each task.
//
// When a partition's rows hardly share a key and interval, the hash table costs more than
// it saves: the driver then sets `Wire.FOLD_PROPERTY` before Spark plans the next
// micro-batch (a local property of the query's thread), and `PartialFold` is planned as
// a projection that makes each row a partial of its own.
//
// A micro-batch runs with the watermark of the ones before it; the next one's is already
// fixed by this one's messages. `NewestPerGroup` sends every key group, from each task
// before the shuffle (one source partition), the newest event time among the rows that
// move Spark's watermark: the job's watermark follows the least of them, and a group can
// checkpoint at the next micro-batch's watermark in this one (persistent.runtime.rows,
// "the watermark").
//
// A task whose messages do not fold (its values come from Python) still need not send
// each message through Spark's shuffle, sort and Arrow conversion one row at a time:
// `PackPerGroup` writes each key group's messages of a partition into one Arrow stream,
// which crosses the shuffle as one row (persistent.runtime.fold.packed).
//
// Maven builds this file into a jar per supported Spark minor version (pom.xml, build_jars.py);
// the runtime loads the running Spark's into the session (no restart, no setting).
package org.apache.spark.sql.persistent

import java.io.ByteArrayOutputStream
import java.nio.channels.Channels

import scala.collection.mutable

import org.apache.arrow.vector.ipc.ArrowStreamWriter

import org.apache.spark.{SparkContext, TaskContext}
import org.apache.spark.rdd.RDD
import org.apache.spark.sql.{Column, DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeReference, AttributeSet, Cast,
  BoundReference, Expression, LeafExpression, Literal, Nondeterministic, UnsafeProjection}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, AggregateFunction, Count, Max, Min,
  Partial, Sum}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, Project, UnaryNode}
import org.apache.spark.sql.classic.{Dataset, ExpressionUtils}
import org.apache.spark.sql.classic.{SparkSession => ClassicSession}
import org.apache.spark.sql.execution.{ProjectExec, SparkPlan, SparkStrategy, UnaryExecNode}
import org.apache.spark.sql.execution.aggregate.HashAggregateExec
import org.apache.spark.sql.execution.arrow.ArrowWriter
import org.apache.spark.sql.types.{BinaryType, DataType, IntegerType, LongType, StructField, StructType}

/** The micro-batch's watermark in ms, from the local property `Wire.WATERMARK_PROPERTY` of
  * the task's job; `Long.MaxValue` (no message is on time, none folds) without one. */
case class BatchWatermark() extends LeafExpression with Nondeterministic with CodegenFallback {
  @transient private var ms: Long = _

  override protected def initializeInternal(partitionIndex: Int): Unit = {
    val context = TaskContext.get()
    val value = if (context == null) null else context.getLocalProperty(Wire.WATERMARK_PROPERTY)
    ms = if (value == null) Long.MaxValue else value.toLong
  }

  override protected def evalInternal(input: InternalRow): Any = ms
  override def nullable: Boolean = false
  override def dataType: DataType = LongType
}

/** The rows of `child` folded per `grouping` within each partition: `folded(i)` is
  * `functions(i)` (`Wire.COUNT`, `SUM`, `MAX` or `MIN`) of `inputs(i)` over a group's rows. */
case class PartialFold(grouping: Seq[Attribute], functions: Seq[String], inputs: Seq[Expression],
                       folded: Seq[Attribute], child: LogicalPlan) extends UnaryNode {
  override def output: Seq[Attribute] = grouping ++ folded
  override def producedAttributes: AttributeSet = AttributeSet(folded)
  override protected def withNewChildInternal(newChild: LogicalPlan): PartialFold = copy(child = newChild)
}

object PartialFold {
  /** Spark's aggregate function `name` of `input`; each keeps one value, its result. */
  def function(name: String, input: Expression): AggregateFunction = name match {
    case Wire.COUNT => Count(Literal(1))
    case Wire.SUM => Sum(input)
    case Wire.MAX => Max(input)
    case Wire.MIN => Min(input)
    case other => throw new IllegalArgumentException(s"PartialFold: no function $other")
  }
}

/** Plans a `PartialFold` as Spark's partial aggregation, without its shuffle; or, while
  * the planning thread's local property `Wire.FOLD_PROPERTY` is `Wire.PASS`, as the partial of
  * each row on its own: a count of 1, the sum, max or min of its input alone. */
object PartialFoldStrategy extends SparkStrategy {
  private def passing: Boolean =
    SparkContext.getActive.flatMap(context => Option(context.getLocalProperty(Wire.FOLD_PROPERTY)))
      .contains(Wire.PASS)

  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case PartialFold(grouping, functions, inputs, folded, child) if passing =>
      val own = functions.zip(inputs).zip(folded).map { case ((name, input), out) =>
        val value = if (name == Wire.COUNT) Literal(1L) else Cast(input, out.dataType)
        Alias(value, out.name)(exprId = out.exprId)
      }
      ProjectExec(grouping ++ own, planLater(child)) :: Nil
    case PartialFold(grouping, functions, inputs, folded, child) =>
      val aggregates = functions.zip(inputs).map { case (name, input) =>
        AggregateExpression(PartialFold.function(name, input), Partial, isDistinct = false)
      }
      val buffers = aggregates.map { aggregate =>
        val buffer = aggregate.aggregateFunction.inputAggBufferAttributes
        require(buffer.size == 1, s"PartialFold: ${aggregate.aggregateFunction} keeps ${buffer.size} values")
        buffer.head
      }
      val partial = HashAggregateExec(None, isStreaming = false, None, grouping, aggregates,
        aggregates.flatMap(_.aggregateFunction.aggBufferAttributes), 0, grouping ++ buffers, planLater(child))
      val named = buffers.zip(folded).map { case (buffer, out) => Alias(buffer, out.name)(exprId = out.exprId) }
      ProjectExec(grouping ++ named, partial) :: Nil
    case _ => Nil
  }
}

/** The rows of `child`, and after each partition's, if any of them is a message (its
  * `kind` is `message`, its `time` a bigint), one row per key group `0 until groups`:
  * column `group` the group, `time` the greatest time of the partition's messages, every
  * other column `rows(name)`'s value. */
case class NewestPerGroup(kind: Attribute, message: Int, group: Attribute, time: Attribute, groups: Int,
                          rows: Map[String, Expression], child: LogicalPlan) extends UnaryNode {
  override def output: Seq[Attribute] = Added.output(child.output, Seq(group, time))
  override protected def withNewChildInternal(newChild: LogicalPlan): NewestPerGroup = copy(child = newChild)
}

/** The rows a node adds to its child's (`NewestPerGroup`, `PackPerGroup`). */
object Added {
  /** The columns of `input` with the added rows: each may be null there but those of `kept`. */
  def output(input: Seq[Attribute], kept: Seq[Attribute]): Seq[Attribute] = input.map { attribute =>
    if (kept.exists(_.exprId == attribute.exprId)) attribute else attribute.withNullability(true)
  }

  /** The columns `output` of an added row, projected from a row of the columns `bound`
    * (in their order): every other column is its value in `rows`. */
  def row(output: Seq[Attribute], bound: Seq[Attribute], rows: Map[String, Expression]): Seq[Expression] =
    output.map { attribute =>
      val at = bound.indexWhere(_.exprId == attribute.exprId)
      if (at >= 0) BoundReference(at, attribute.dataType, nullable = false)
      else Cast(rows(attribute.name), attribute.dataType, Some("UTC"))
    }
}

case class NewestPerGroupExec(kind: Attribute, message: Int, group: Attribute, time: Attribute, groups: Int,
                              rows: Map[String, Expression], child: SparkPlan) extends UnaryExecNode {
  override def output: Seq[Attribute] = Added.output(child.output, Seq(group, time))
  override protected def withNewChildInternal(newChild: SparkPlan): NewestPerGroupExec = copy(child = newChild)

  override protected def doExecute(): RDD[InternalRow] = {
    val Seq(kindAt, timeAt) = Seq(kind, time).map(a => child.output.indexWhere(_.exprId == a.exprId))
    // A key group's row, of (group, time).
    val (added, count, messageKind) = (Added.row(output, Seq(group, time), rows), groups, message.toByte)
    child.execute().mapPartitionsInternal { input =>
      var seen = false
      var greatest = Long.MinValue
      val passed = input.map { row =>
        if (row.getByte(kindAt) == messageKind && !row.isNullAt(timeAt)) {
          seen = true
          greatest = math.max(greatest, row.getLong(timeAt))
        }
        row
      }
      passed ++ {
        if (!seen) Iterator.empty
        else {
          val project = UnsafeProjection.create(added)
          (0 until count).iterator.map(grp => project(InternalRow(grp, greatest)).copy())
        }
      }
    }
  }
}

object NewestPerGroupStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case NewestPerGroup(kind, message, group, time, groups, rows, child) =>
      NewestPerGroupExec(kind, message, group, time, groups, rows, planLater(child)) :: Nil
    case _ => Nil
  }
}

/** The rows of `child`, its messages (rows whose `kind` is `message`) packed per key
  * group and partition: after each partition's rows, or once a group's pack holds `most`
  * messages, one row per pack whose column `packed` is the
  * messages' columns `columns` as an Arrow stream and `seq` its place among the
  * partition's packs of the group; `group` and `part` its messages', every other column
  * `rows(name)`'s value. Other rows pass as they are. */
case class PackPerGroup(kind: Attribute, message: Int, group: Attribute, part: Attribute,
                        columns: Seq[Attribute], most: Int, rows: Map[String, Expression], packed: Attribute,
                        seq: Attribute, child: LogicalPlan) extends UnaryNode {
  override def output: Seq[Attribute] = Added.output(child.output, Seq(kind, group, part)) ++ Seq(packed, seq)
  override def producedAttributes: AttributeSet = AttributeSet(Seq(packed, seq))
  override protected def withNewChildInternal(newChild: LogicalPlan): PackPerGroup = copy(child = newChild)
}

/** One key group's pack of messages in a task: their columns in Arrow vectors, until `take`. */
private class Pack(schema: StructType, timeZone: String) {
  private val writer = ArrowWriter.create(schema, timeZone, true, false)
  var count = 0
  var seq = 0

  def add(row: InternalRow): Unit = {
    writer.write(row)
    count += 1
  }

  /** The messages added since the last take, as an Arrow stream. */
  def take(): Array[Byte] = {
    writer.finish()
    val bytes = new ByteArrayOutputStream()
    val stream = new ArrowStreamWriter(writer.root, null, Channels.newChannel(bytes))
    stream.start()
    stream.writeBatch()
    stream.end()
    writer.reset()
    count = 0
    seq += 1
    bytes.toByteArray
  }

  def close(): Unit = writer.root.close()
}

case class PackPerGroupExec(kind: Attribute, message: Int, group: Attribute, part: Attribute,
                            columns: Seq[Attribute], most: Int, rows: Map[String, Expression], packed: Attribute,
                            seq: Attribute, child: SparkPlan) extends UnaryExecNode {
  override def output: Seq[Attribute] = Added.output(child.output, Seq(kind, group, part)) ++ Seq(packed, seq)
  override protected def withNewChildInternal(newChild: SparkPlan): PackPerGroupExec = copy(child = newChild)

  override protected def doExecute(): RDD[InternalRow] = {
    val input = child.output
    val Seq(kindAt, groupAt, partAt) = Seq(kind, group, part).map(a => input.indexWhere(_.exprId == a.exprId))
    val schema = StructType(columns.map(c => StructField(c.name, c.dataType, c.nullable)))
    val timeZone = conf.sessionLocalTimeZone
    // A pack's row, of (group, part, packed, seq).
    val added = Added.row(output, Seq(group, part, packed, seq), rows)
    val (limit, messageKind, cols) = (most, message.toByte, columns)
    child.execute().mapPartitionsInternal { rowsIn =>
      // The packed columns, or the row itself when they are its first (ArrowWriter reads
      // as many columns as it writes, from the first).
      val picks: InternalRow => InternalRow =
        if (cols.map(c => input.indexWhere(_.exprId == c.exprId)) == cols.indices) identity
        else UnsafeProjection.create(cols, input)
      val project = UnsafeProjection.create(added)
      // Another row, with a null pack.
      val passed = UnsafeProjection.create(input ++ Seq(Literal(null, BinaryType), Literal(null, IntegerType)), input)
      val packs = mutable.LinkedHashMap[Int, Pack]()
      var source = 0
      Option(TaskContext.get()).foreach(_.addTaskCompletionListener[Unit](_ => packs.values.foreach(_.close())))

      def taken(grp: Int, pack: Pack): InternalRow = {
        val seq = pack.seq
        project(InternalRow(grp, source, pack.take(), seq)).copy()
      }

      new Iterator[InternalRow] {
        private var ready: InternalRow = _
        private var last: Iterator[InternalRow] = Iterator.empty
        private var ending = false

        // A row passed on goes out before the next is read: the projection reuses it.
        private def advance(): Unit = {
          while (ready == null && (last.hasNext || !ending)) {
            if (last.hasNext) ready = last.next()
            else if (!rowsIn.hasNext) {
              ending = true
              last = packs.iterator.collect { case (grp, pack) if pack.count > 0 => taken(grp, pack) }
            } else {
              val row = rowsIn.next()
              if (row.getByte(kindAt) != messageKind) ready = passed(row)
              else {
                val grp = row.getInt(groupAt)
                source = row.getInt(partAt)
                val pack = packs.getOrElseUpdate(grp, new Pack(schema, timeZone))
                pack.add(picks(row))
                if (pack.count >= limit) ready = taken(grp, pack)
              }
            }
          }
        }

        override def hasNext: Boolean = {
          advance()
          ready != null
        }

        override def next(): InternalRow = {
          advance()
          if (ready == null) throw new NoSuchElementException("PackPerGroup: no more rows")
          val row = ready
          ready = null
          row
        }
      }
    }
  }
}

object PackPerGroupStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case PackPerGroup(kind, message, group, part, columns, most, rows, packed, seq, child) =>
      PackPerGroupExec(kind, message, group, part, columns, most, rows, packed, seq, planLater(child)) :: Nil
    case _ => Nil
  }
}

/** What the runtime calls, through Py4J. */
object Fold {
  /** `plan`'s output column `name`, for `node`'s message when it has none. */
  private def column(plan: LogicalPlan, node: String)(name: String): Attribute =
    plan.output.find(_.name == name).getOrElse(
      throw new IllegalArgumentException(s"$node: no column $name in ${plan.output.map(_.name).mkString(", ")}"))

  /** The micro-batch's watermark, as a column. */
  def watermark(): Column = ExpressionUtils.column(BatchWatermark())

  /** `frame` folded per the columns `grouping` in each partition: column `names(i)` is
    * `functions(i)` of column `inputs(i)`. */
  def partial(frame: DataFrame, grouping: Array[String], functions: Array[String], inputs: Array[String],
              names: Array[String]): DataFrame = {
    val plan = frame.queryExecution.analyzed
    val attribute: String => Attribute = column(plan, "PartialFold")
    val in = inputs.toSeq.map(attribute)
    val folded = functions.toSeq.zip(in).zip(names).map { case ((function, input), name) =>
      AttributeReference(name, PartialFold.function(function, input).dataType)()
    }
    val fold = PartialFold(grouping.toSeq.map(attribute), functions.toSeq, in, folded, plan)
    Dataset.ofRows(frame.sparkSession.asInstanceOf[ClassicSession], fold)
  }

  /** `frame` with, after each partition's rows, one row per key group carrying the
    * greatest `time` of its messages (`NewestPerGroup`, rows whose column `kind` is
    * `message`): `group` the group, `time` that value, column `names(i)` the value of
    * `values(i)`. */
  def newest(frame: DataFrame, kind: String, message: Int, group: String, time: String, groups: Int,
             names: Array[String], values: Array[Column]): DataFrame = {
    val plan = frame.queryExecution.analyzed
    val attribute: String => Attribute = column(plan, "NewestPerGroup")
    val rows = constants(frame, "NewestPerGroup", names, values)
    val node = NewestPerGroup(attribute(kind), message, attribute(group), attribute(time), groups, rows, plan)
    Dataset.ofRows(frame.sparkSession.asInstanceOf[ClassicSession], node)
  }

  /** `frame` with its rows of kind `message` packed per key group (`PackPerGroup`): column
    * `kind` the kind, `group` the group, `part` the source partition; the columns
    * `columns` packed, at most `most` rows a pack, in a new column `packed` and its place
    * `seq`; a pack's column `names(i)` the value of `values(i)`. */
  def pack(frame: DataFrame, kind: String, message: Int, group: String, part: String,
           columns: Array[String], most: Int, packed: String, seq: String, names: Array[String],
           values: Array[Column]): DataFrame = {
    val plan = frame.queryExecution.analyzed
    val attribute: String => Attribute = column(plan, "PackPerGroup")
    val rows = constants(frame, "PackPerGroup", names, values)
    val node = PackPerGroup(attribute(kind), message, attribute(group), attribute(part),
      columns.toSeq.map(attribute), most, rows, AttributeReference(packed, BinaryType)(),
      AttributeReference(seq, IntegerType)(), plan)
    Dataset.ofRows(frame.sparkSession.asInstanceOf[ClassicSession], node)
  }

  /** The `values` by `names`, analyzed where Spark resolves them and evaluated once: constants. */
  private def constants(frame: DataFrame, node: String, names: Array[String],
                        values: Array[Column]): Map[String, Expression] = {
    val selected = frame.sparkSession.range(1).select(values.toSeq: _*).queryExecution.analyzed
    val projected = selected.collectFirst { case project: Project => project.projectList }.getOrElse(
      throw new IllegalArgumentException(s"$node: the values are no projection: $selected"))
    names.toSeq.zip(projected.map(value => Literal(value.eval(), value.dataType))).toMap
  }

  /** Lets `session`'s planner plan a `PartialFold`, a `NewestPerGroup` and a `PackPerGroup`. */
  def register(session: SparkSession): Unit = {
    val methods = session.experimental
    for (strategy <- Seq(PartialFoldStrategy, NewestPerGroupStrategy, PackPerGroupStrategy) if !methods.extraStrategies.contains(strategy)) {
      methods.extraStrategies = methods.extraStrategies :+ strategy
    }
  }
}
