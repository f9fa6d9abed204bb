"""A spark-submit entry for the cluster test: the analysis (spark_analyze.py's flags), then one write to s3a://
through the S3A committer the product configures (Hadoop's magic committer), read back.

`spark-submit ... spark_s3a_write.py <s3a output URI> -- <analyze flags>`
"""

from __future__ import annotations

import sys

from backend.pipeline.cli import main as analyze
from backend.pipeline.spark import get_spark

if __name__ == "__main__":
    output, flags = sys.argv[1], sys.argv[3:]
    code = analyze(flags)
    if code == 0:
        spark = get_spark(lake=output.replace("s3a://", "s3://", 1).rsplit("/", 1)[0])
        rows = spark.sparkContext.parallelize([(f"k{i}", str(i)) for i in range(100)], 4)
        rows.saveAsNewAPIHadoopFile(output, "org.apache.hadoop.mapreduce.lib.output.TextOutputFormat",
                                    "org.apache.hadoop.io.Text", "org.apache.hadoop.io.Text")
        print("read back:", spark.sparkContext.textFile(output).count())
    sys.exit(code)
