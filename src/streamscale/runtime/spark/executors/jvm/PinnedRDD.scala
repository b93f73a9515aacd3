package streamscale.spark

import scala.reflect.ClassTag

import org.apache.spark.{Partition, TaskContext}
import org.apache.spark.rdd.RDD

/** The partitions of `prev`, unchanged, each preferring the location `locs(i)`.
 *
 * A location `executor_<host>_<id>` asks Spark's scheduler for that one executor
 * (process-local); an empty or missing entry leaves the partition unpinned. Nothing
 * is computed here: the wrapper only reports where each partition should run.
 */
class PinnedRDD[T: ClassTag](prev: RDD[T], locs: Array[String]) extends RDD[T](prev) {
  override protected def getPartitions: Array[Partition] = firstParent[T].partitions

  override def compute(split: Partition, context: TaskContext): Iterator[T] =
    firstParent[T].iterator(split, context)

  override protected def getPreferredLocations(split: Partition): Seq[String] = {
    val i = split.index
    if (i < locs.length && locs(i) != null && locs(i).nonEmpty) Seq(locs(i)) else Nil
  }
}

object Pinning {
  /** `rdd` with partition `i` preferring `locs(i)` (callable from py4j: no implicits). */
  def pin[T](rdd: RDD[T], locs: Array[String]): RDD[T] =
    new PinnedRDD[T](rdd, locs)(ClassTag.AnyRef.asInstanceOf[ClassTag[T]])
}
