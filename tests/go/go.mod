module tlsperf-test-peers

go 1.19
