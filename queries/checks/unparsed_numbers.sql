-- name: unparsed_numbers
-- description: Numeric cells of a dump that held text no profiler writes (hex, 1_000, NaN, Infinity, 1e400, non-ASCII digits) and were stored as NULL at ingest.
-- param: run_id VARCHAR          -- run to check
-- column: rank INTEGER           -- rank whose file held them
-- column: file VARCHAR           -- the dump file
-- column: field VARCHAR          -- its column
-- column: cells BIGINT           -- cells stored as NULL
-- column: first_line BIGINT      -- line of the first one (the header is line 1)
-- column: example VARCHAR        -- its text (first 40 characters)
SELECT rank,
       json_extract_string(value, '$.file') AS file,
       json_extract_string(value, '$.column') AS field,
       CAST(json_extract(value, '$.cells') AS BIGINT) AS cells,
       CAST(json_extract(value, '$.first_line') AS BIGINT) AS first_line,
       json_extract_string(value, '$.example') AS example
FROM run_meta
WHERE run_id = $run_id AND key LIKE 'traceql.unparsed_numbers.%'
ORDER BY rank, file, field;
