"""Summary tables: a table's float format never hides a value it cannot show."""
import pandas as pd

from scribe_spark.report import markdown_table


def test_small_values_keep_their_digits_in_a_table_of_one_decimal():
    table = pd.DataFrame({"service_ms": [0.05, 0.1], "loss": [0.02, 0.0], "latency_ms": [163.34, 457.91],
                          "count": [7, 12]})
    rows = markdown_table(table, ".1f").splitlines()
    assert rows[2] == "| 0.05 | 0.02 | 163.3 | 7 |"
    assert rows[3] == "| 0.1 | 0.0 | 457.9 | 12 |"
