"""One package per workload; see suite.workload.discover."""
