"""What people use around a job: the ``persistent`` command line, the examples'
options, reading a job directory without a JVM, the SparkSession with the
project's configuration, the environment check, and the task tester."""
