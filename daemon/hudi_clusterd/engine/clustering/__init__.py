"""The Spark side of clustering: a group's scan, layout sort, exchange and sized write."""
