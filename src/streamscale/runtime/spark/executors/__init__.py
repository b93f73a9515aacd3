"""The Spark application's session and executors: building the session, sizing executors to the plan, the slot map, and enforced placement of tasks on executors (with its JVM part)."""
