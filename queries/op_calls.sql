-- name: op_calls
-- description: Every call of one operator (by name or type) with its shapes, formats, HBM bytes and achieved bandwidth: the evidence behind a finding.
-- param: op VARCHAR                    -- operator name or type to list (exact match on name or op_type)
-- param: limit_n INTEGER = 1000        -- at most this many calls, in time order
-- param: peak_hbm_bps DOUBLE = NULL    -- device HBM peak, bytes/s (traceql fills it from the device preset)
-- column: run_id VARCHAR               -- run
-- column: rank INTEGER                 -- rank
-- column: step BIGINT                  -- profiler step
-- column: name VARCHAR                 -- operator name
-- column: op_type VARCHAR              -- operator type
-- column: task_type VARCHAR            -- core/task type
-- column: ts_ns BIGINT                 -- start, ns since Unix epoch
-- column: dur_ns BIGINT                -- device time, ns
-- column: input_shapes VARCHAR         -- input shapes, `;` between inputs
-- column: input_dtypes VARCHAR         -- input dtypes
-- column: input_formats VARCHAR        -- input formats
-- column: output_shapes VARCHAR        -- output shapes
-- column: output_dtypes VARCHAR        -- output dtypes
-- column: output_formats VARCHAR       -- output formats
-- column: hbm_read_bytes BIGINT        -- HBM bytes read (see hbm_bytes_source)
-- column: hbm_write_bytes BIGINT       -- HBM bytes written
-- column: hbm_bytes BIGINT             -- read + write
-- column: hbm_bytes_source VARCHAR     -- pmu | sampled | modeled (definitions in _helpers.sql)
-- column: achieved_bw_bps DOUBLE       -- hbm_bytes / dur, bytes/s
-- column: bw_utilization DOUBLE        -- achieved_bw_bps / peak_hbm_bps, 0..1
SELECT run_id, rank, step, name, op_type, task_type, ts_ns, dur_ns,
       input_shapes, input_dtypes, input_formats, output_shapes, output_dtypes, output_formats,
       read_bytes AS hbm_read_bytes, write_bytes AS hbm_write_bytes, hbm_bytes, hbm_bytes_source,
       hbm_bytes * 1e9 / nullif(dur_ns, 0) AS achieved_bw_bps,
       hbm_bytes * 1e9 / nullif(dur_ns, 0) / $peak_hbm_bps::DOUBLE AS bw_utilization
FROM kernel_bytes
WHERE name = $op OR op_type = $op
ORDER BY ts_ns, rank
LIMIT $limit_n;
