"""The runtime of the Spark archive job (:mod:`amqp_dissect.pipelines.spark`): the Spark session
and the code shipped to its executors (:mod:`.session`), inputs and outputs on any Hadoop file
system (:mod:`.fs`), and the local executors' Python workers: their daemon (:mod:`.daemon`), the
zygote that imports their modules while the JVM starts (:mod:`.zygote`) and those modules
(:mod:`.preload`)."""
