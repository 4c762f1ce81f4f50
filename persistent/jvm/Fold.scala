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
// it saves: the driver then sets `PartialFold.Property` before Spark plans the next
// micro-batch (a local property of the query's thread), and `PartialFold` is planned as
// a projection that makes each row a partial of its own.
//
// A micro-batch runs with the watermark of the ones before it; the next one's is already
// fixed by this one's messages. `NewestPerGroup` sends every key group, from each task
// before the shuffle, the newest event time among the rows that move Spark's watermark,
// so that a group can checkpoint at the next micro-batch's watermark in this one
// (persistent.runtime.rows, "the watermark").
//
// The runtime compiles this file with the Scala compiler in pyspark's own jars, against
// the Spark it runs on, and loads it into the running session (no restart, no setting).
package org.apache.spark.sql.persistent

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
import org.apache.spark.sql.types.{DataType, IntegerType, LongType}

/** The micro-batch's watermark in ms, from the local property `BatchWatermark.Property` of
  * the task's job; `Long.MaxValue` (no message is on time, none folds) without one. */
case class BatchWatermark() extends LeafExpression with Nondeterministic with CodegenFallback {
  @transient private var ms: Long = _

  override protected def initializeInternal(partitionIndex: Int): Unit = {
    val context = TaskContext.get()
    val value = if (context == null) null else context.getLocalProperty(BatchWatermark.Property)
    ms = if (value == null) Long.MaxValue else value.toLong
  }

  override protected def evalInternal(input: InternalRow): Any = ms
  override def nullable: Boolean = false
  override def dataType: DataType = LongType
}

object BatchWatermark {
  val Property = "persistent.watermark_ms"
}

/** The rows of `child` folded per `grouping` within each partition: `folded(i)` is
  * `functions(i)` ("count", "sum", "max" or "min") of `inputs(i)` over a group's rows. */
case class PartialFold(grouping: Seq[Attribute], functions: Seq[String], inputs: Seq[Expression],
                       folded: Seq[Attribute], child: LogicalPlan) extends UnaryNode {
  override def output: Seq[Attribute] = grouping ++ folded
  override def producedAttributes: AttributeSet = AttributeSet(folded)
  override protected def withNewChildInternal(newChild: LogicalPlan): PartialFold = copy(child = newChild)
}

object PartialFold {
  /** The local property of the planning thread that, `Pass`, plans each row as a partial of its own. */
  val Property = "persistent.fold"
  val Pass = "pass"

  /** Spark's aggregate function `name` of `input`; each keeps one value, its result. */
  def function(name: String, input: Expression): AggregateFunction = name match {
    case "count" => Count(Literal(1))
    case "sum" => Sum(input)
    case "max" => Max(input)
    case "min" => Min(input)
    case other => throw new IllegalArgumentException(s"PartialFold: no function $other")
  }
}

/** Plans a `PartialFold` as Spark's partial aggregation, without its shuffle; or, while
  * the planning thread's `PartialFold.Property` is `PartialFold.Pass`, as the partial of
  * each row on its own: a count of 1, the sum, max or min of its input alone. */
object PartialFoldStrategy extends SparkStrategy {
  private def passing: Boolean =
    SparkContext.getActive.flatMap(context => Option(context.getLocalProperty(PartialFold.Property)))
      .contains(PartialFold.Pass)

  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case PartialFold(grouping, functions, inputs, folded, child) if passing =>
      val own = functions.zip(inputs).zip(folded).map { case ((name, input), out) =>
        val value = if (name == "count") Literal(1L) else Cast(input, out.dataType)
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

/** The rows of `child`, and after each partition's, if any of them has a `newest` (a
  * nullable bigint), one row per key group `0 until groups`: column `group` the group,
  * `time` the partition's greatest `newest`, every other column `rows(name)`'s value. */
case class NewestPerGroup(newest: Attribute, group: Attribute, time: Attribute, groups: Int,
                          rows: Map[String, Expression], child: LogicalPlan) extends UnaryNode {
  override def output: Seq[Attribute] = NewestPerGroup.output(child.output, group, time)
  override protected def withNewChildInternal(newChild: LogicalPlan): NewestPerGroup = copy(child = newChild)
}

object NewestPerGroup {
  /** The columns of `input` after the rows of the key groups: each may be null there but `group` and `time`. */
  def output(input: Seq[Attribute], group: Attribute, time: Attribute): Seq[Attribute] = input.map { attribute =>
    if (attribute.exprId == group.exprId || attribute.exprId == time.exprId) attribute
    else attribute.withNullability(true)
  }
}

case class NewestPerGroupExec(newest: Attribute, group: Attribute, time: Attribute, groups: Int,
                              rows: Map[String, Expression], child: SparkPlan) extends UnaryExecNode {
  override def output: Seq[Attribute] = NewestPerGroup.output(child.output, group, time)
  override protected def withNewChildInternal(newChild: SparkPlan): NewestPerGroupExec = copy(child = newChild)

  override protected def doExecute(): RDD[InternalRow] = {
    val index = child.output.indexWhere(_.exprId == newest.exprId)
    // A key group's row, of (group, time): those two bound, every other column a value.
    val columns = output.map { attribute =>
      val value =
        if (attribute.exprId == group.exprId) BoundReference(0, IntegerType, nullable = false)
        else if (attribute.exprId == time.exprId) BoundReference(1, LongType, nullable = false)
        else rows(attribute.name)
      Cast(value, attribute.dataType, Some("UTC"))
    }
    val count = groups
    child.execute().mapPartitionsInternal { input =>
      var seen = false
      var greatest = Long.MinValue
      val passed = input.map { row =>
        if (!row.isNullAt(index)) {
          seen = true
          greatest = math.max(greatest, row.getLong(index))
        }
        row
      }
      passed ++ {
        if (!seen) Iterator.empty
        else {
          val project = UnsafeProjection.create(columns)
          (0 until count).iterator.map(grp => project(InternalRow(grp, greatest)).copy())
        }
      }
    }
  }
}

object NewestPerGroupStrategy extends SparkStrategy {
  override def apply(plan: LogicalPlan): Seq[SparkPlan] = plan match {
    case NewestPerGroup(newest, group, time, groups, rows, child) =>
      NewestPerGroupExec(newest, group, time, groups, rows, planLater(child)) :: Nil
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
    * greatest value of column `newest` (`NewestPerGroup`): `group` the group, `time`
    * that value, column `names(i)` the value of `values(i)`. */
  def newest(frame: DataFrame, newest: String, group: String, time: String, groups: Int, names: Array[String],
             values: Array[Column]): DataFrame = {
    val plan = frame.queryExecution.analyzed
    val attribute: String => Attribute = column(plan, "NewestPerGroup")
    // The values, analyzed where Spark resolves them and evaluated once: constants.
    val selected = frame.sparkSession.range(1).select(values.toSeq: _*).queryExecution.analyzed
    val constants = selected.collectFirst { case project: Project => project.projectList }.getOrElse(
      throw new IllegalArgumentException(s"NewestPerGroup: the values are no projection: $selected"))
    val rows = names.toSeq.zip(constants.map(value => Literal(value.eval(), value.dataType))).toMap
    val node = NewestPerGroup(attribute(newest), attribute(group), attribute(time), groups, rows, plan)
    Dataset.ofRows(frame.sparkSession.asInstanceOf[ClassicSession], node)
  }

  /** Lets `session`'s planner plan a `PartialFold` and a `NewestPerGroup`. */
  def register(session: SparkSession): Unit = {
    val methods = session.experimental
    for (strategy <- Seq(PartialFoldStrategy, NewestPerGroupStrategy) if !methods.extraStrategies.contains(strategy)) {
      methods.extraStrategies = methods.extraStrategies :+ strategy
    }
  }
}
