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
// The runtime compiles this file with the Scala compiler in pyspark's own jars, against
// the Spark it runs on, and loads it into the running session (no restart, no setting).
package org.apache.spark.sql.persistent

import org.apache.spark.{SparkContext, TaskContext}
import org.apache.spark.sql.{Column, DataFrame, SparkSession}
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Alias, Attribute, AttributeReference, AttributeSet, Cast,
  Expression, LeafExpression, Literal, Nondeterministic}
import org.apache.spark.sql.catalyst.expressions.aggregate.{AggregateExpression, AggregateFunction, Count, Max, Min,
  Partial, Sum}
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback
import org.apache.spark.sql.catalyst.plans.logical.{LogicalPlan, UnaryNode}
import org.apache.spark.sql.classic.{Dataset, ExpressionUtils}
import org.apache.spark.sql.classic.{SparkSession => ClassicSession}
import org.apache.spark.sql.execution.{ProjectExec, SparkPlan, SparkStrategy}
import org.apache.spark.sql.execution.aggregate.HashAggregateExec
import org.apache.spark.sql.types.{DataType, LongType}

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

/** What the runtime calls, through Py4J. */
object Fold {
  /** The micro-batch's watermark, as a column. */
  def watermark(): Column = ExpressionUtils.column(BatchWatermark())

  /** `frame` folded per the columns `grouping` in each partition: column `names(i)` is
    * `functions(i)` of column `inputs(i)`. */
  def partial(frame: DataFrame, grouping: Array[String], functions: Array[String], inputs: Array[String],
              names: Array[String]): DataFrame = {
    val plan = frame.queryExecution.analyzed
    def column(name: String): Attribute = plan.output.find(_.name == name).getOrElse(
      throw new IllegalArgumentException(s"PartialFold: no column $name in ${plan.output.map(_.name).mkString(", ")}"))
    val in = inputs.toSeq.map(column)
    val folded = functions.toSeq.zip(in).zip(names).map { case ((function, input), name) =>
      AttributeReference(name, PartialFold.function(function, input).dataType)()
    }
    val fold = PartialFold(grouping.toSeq.map(column), functions.toSeq, in, folded, plan)
    Dataset.ofRows(frame.sparkSession.asInstanceOf[ClassicSession], fold)
  }

  /** Lets `session`'s planner plan a `PartialFold`. */
  def register(session: SparkSession): Unit = {
    val methods = session.experimental
    if (!methods.extraStrategies.contains(PartialFoldStrategy)) {
      methods.extraStrategies = methods.extraStrategies :+ PartialFoldStrategy
    }
  }
}
