-- The application's PostgreSQL role and its database: the least it needs (docs/deploying.md#the-database-role).
-- Run as a superuser: psql -v role=silvia -v database=silvia -f deploy/database-role.sql
CREATE ROLE :"role" LOGIN CREATEROLE;
CREATE DATABASE :"database" OWNER :"role";
