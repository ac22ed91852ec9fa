-- name: byte_model_vs_measured
-- description: Operators whose HBM bytes were measured (per-task PMU, or an msprof op / OPPROF collection) and can also be modeled from tensor shapes x dtypes (in this run, or in another run in the store with the same kernel name), where the model is off by more than the tolerance: below, the model (a lower bound) misses re-reads, workspace or padding; above, it cannot hold (L2/UB served the tensors, or the shapes are not what ran).
-- param: run_id VARCHAR             -- run with the measured bytes
-- param: tolerance DOUBLE = 0.1     -- allowed |modeled / measured - 1|
-- needs: analysis
-- column: name VARCHAR              -- kernel name
-- column: launches BIGINT           -- measured launches of it in the run
-- column: measured_bytes BIGINT     -- mean measured read + write bytes per launch
-- column: model_run VARCHAR         -- run the shapes came from
-- column: modeled_calls BIGINT      -- calls with shapes there
-- column: modeled_bytes BIGINT      -- mean input + output tensor bytes per call (inputs count 0 for write-only ops)
-- column: model_over_measured DOUBLE -- modeled_bytes / measured_bytes
WITH measured AS (
    SELECT name, count(*) AS launches,
           avg(coalesce(hbm_read_bytes, 0) + coalesce(hbm_write_bytes, 0)) AS measured_bytes
    FROM kernels
    WHERE run_id = $run_id AND (hbm_read_bytes IS NOT NULL OR hbm_write_bytes IS NOT NULL)
    GROUP BY name
), modeled AS (
    SELECT run_id AS model_run, name, count(*) AS modeled_calls,
           avg(CASE WHEN _is_write_only(_op_name(op_type, name)) THEN 0
                    ELSE _tensors_bytes(input_shapes, input_dtypes) END
               + coalesce(_tensors_bytes(output_shapes, output_dtypes), 0)) AS modeled_bytes
    FROM kernels
    WHERE name IN (SELECT name FROM measured) AND _tensors_bytes(input_shapes, input_dtypes) IS NOT NULL
    GROUP BY run_id, name
)
SELECT m.name, m.launches, round(m.measured_bytes)::BIGINT AS measured_bytes, d.model_run, d.modeled_calls,
       round(d.modeled_bytes)::BIGINT AS modeled_bytes, d.modeled_bytes / m.measured_bytes AS model_over_measured
FROM measured m JOIN modeled d ON d.name = m.name
WHERE m.measured_bytes > 0 AND abs(d.modeled_bytes / m.measured_bytes - 1) > $tolerance
ORDER BY abs(d.modeled_bytes / m.measured_bytes - 1) DESC, m.name, d.model_run;
