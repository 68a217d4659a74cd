"""Tools around the product: parity of the simulator with the real CybORG (parity) and the
throughput benchmarks behind `wfrl bench` (benchmarks)."""
