-- The plan check's EXPLAIN, as a function of the harness's own session
-- (pg_temp: gone when the session ends). It prepares a statement as the
-- service sends it ($1, $2, … placeholders), gives each parameter a
-- representative value of its type (an unknown text, a fresh uuid, now(),
-- an hour in seconds …: values that select a row or a few, as the request
-- paths do), and returns the plan Postgres picks for those values (a
-- custom plan), plus the plan it picks when sequential scans are all but
-- forbidden (enable_seqscan off): a sequential scan still there means no
-- index can serve the statement at all. Utility statements (BEGIN, SET …)
-- cannot be prepared and come back as {"error": …}.
CREATE FUNCTION pg_temp.bench_explain(q text) RETURNS jsonb LANGUAGE plpgsql AS $fn$
DECLARE
    types regtype[];
    args text[] := '{}';
    t regtype;
    call text;
    plan jsonb;
    forced jsonb;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = 'bench_s') THEN
        DEALLOCATE bench_s;
    END IF;
    EXECUTE 'PREPARE bench_s AS ' || q;
    SELECT parameter_types INTO types FROM pg_prepared_statements WHERE name = 'bench_s';
    FOREACH t IN ARRAY coalesce(types, '{}') LOOP
        args := args || CASE
            WHEN t IN ('text'::regtype, 'character varying'::regtype, 'name'::regtype) THEN '''seed-42''::' || t
            WHEN t = 'uuid'::regtype THEN 'gen_random_uuid()'
            WHEN t = 'bytea'::regtype THEN 'sha256(''x'')'
            WHEN t IN ('timestamp with time zone'::regtype, 'timestamp without time zone'::regtype) THEN 'now()'
            WHEN t IN ('smallint'::regtype, 'integer'::regtype, 'bigint'::regtype, 'double precision'::regtype, 'real'::regtype, 'numeric'::regtype) THEN '3600'
            WHEN t = 'boolean'::regtype THEN 'true'
            WHEN t = 'interval'::regtype THEN '''1 hour'''
            WHEN t IN ('json'::regtype, 'jsonb'::regtype) THEN '''{}'''
            WHEN t::text LIKE '%[]' THEN '''{}'''
            ELSE 'NULL'
        END;
    END LOOP;
    call := 'EXPLAIN (FORMAT JSON) EXECUTE bench_s'
        || CASE WHEN cardinality(args) > 0 THEN '(' || array_to_string(args, ', ') || ')' ELSE '' END;
    PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
    EXECUTE call INTO plan;
    -- Prepared again: a statement without parameters keeps the plan its
    -- first EXECUTE made, whatever enable_seqscan says afterwards.
    DEALLOCATE bench_s;
    EXECUTE 'PREPARE bench_s AS ' || q;
    PERFORM set_config('enable_seqscan', 'off', true);
    EXECUTE call INTO forced;
    PERFORM set_config('enable_seqscan', 'on', true);
    DEALLOCATE bench_s;
    RETURN jsonb_build_object('plan', plan, 'forced', forced);
EXCEPTION WHEN OTHERS THEN
    IF EXISTS (SELECT 1 FROM pg_prepared_statements WHERE name = 'bench_s') THEN
        DEALLOCATE bench_s;
    END IF;
    RETURN jsonb_build_object('error', SQLERRM);
END
$fn$;
