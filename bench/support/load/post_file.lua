-- wrk script: POST a body read from a file (binary bodies cannot travel in the
-- environment), with extra headers; on exit print one JSON line, as post.lua does.
-- Usage: BENCH_BODY_FILE=body.bin BENCH_HEADERS='Name:value;Other:value' \
--        wrk -t1 -c16 -d5s --latency -s bench/support/load/post_file.lua URL
local f = assert(io.open(os.getenv("BENCH_BODY_FILE"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*a")
f:close()
for name, value in string.gmatch(os.getenv("BENCH_HEADERS") or "", "([^:;]+):([^;]*)") do
  wrk.headers[name] = value
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.2f}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, latency.mean))
end
