-- The runtime role: what the web, stream and worker processes serve as (docs/deploying.md#the-runtime-role).
-- Run as the database's owner role, after `migrate`, in the application's database:
-- psql -v runtime=silvia_app -v reader=silvia_sql_reader -f deploy/runtime-role.sql postgres://silvia@db/silvia
CREATE ROLE :"runtime" LOGIN;
-- DML on the tables, and the sequences their ids come from; also on the tables later migrations create.
GRANT USAGE ON SCHEMA public TO :"runtime";
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO :"runtime";
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO :"runtime";
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO :"runtime";
ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT USAGE, SELECT ON SEQUENCES TO :"runtime";
-- Row-level security filters everyone but the tables' owner: the runtime role reads and writes every row,
-- as the owner does (the SQL tool's queries run as the reader role, filtered to the caller's rows).
CREATE POLICY runtime_rows ON finance_connection TO :"runtime" USING (true) WITH CHECK (true);
CREATE POLICY runtime_rows ON finance_account TO :"runtime" USING (true) WITH CHECK (true);
CREATE POLICY runtime_rows ON finance_holding TO :"runtime" USING (true) WITH CHECK (true);
-- The SQL tool switches to the reader role for each query (docs/sql-tool.md#the-roles).
GRANT :"reader" TO :"runtime";
