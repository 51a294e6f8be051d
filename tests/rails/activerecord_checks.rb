#!/usr/bin/env ruby
# ActiveRecord (Debian's ruby-activerecord 6.1 and ruby-mysql2) against one
# MySQL-protocol server, as a Rails application uses it: default connection
# settings (encoding utf8mb4, strict mode), migrations up and down, and a
# Lobsters-like model set. scripts/rails.sh runs it against Ladle and
# MariaDB and compares the two.
#
#   ruby tests/rails/activerecord_checks.rb HOST PORT [NAME_FILTER]
#
# Prints one "CHECK <name> pass|fail ..." line per check (harness.rb) and
# exits 1 when a check failed. RAILS_SQL_LOG=path logs every statement.
require "logger"
require "active_record"
require "bigdecimal"
require_relative "harness"

HOST = ARGV.fetch(0, "127.0.0.1")
PORT = Integer(ARGV.fetch(1, "3306"))
FILTER = ARGV[2]
DATABASE = "rails_checks"
MIGRATIONS = File.join(__dir__, "migrate")
LATEST = 20260101000008

CONFIG = {
  adapter: "mysql2", host: HOST, port: PORT, username: "root", password: "",
  encoding: "utf8mb4", database: DATABASE, pool: 5, connect_timeout: 10
}.freeze

ActiveRecord::Base.default_timezone = :utc
ActiveRecord::Base.logger = Logger.new(ENV["RAILS_SQL_LOG"]) if ENV["RAILS_SQL_LOG"]
ActiveRecord::Migration.verbose = false

def migration_context
  ActiveRecord::MigrationContext.new(MIGRATIONS, ActiveRecord::SchemaMigration)
end

def conn
  ActiveRecord::Base.connection
end

require_relative "models"
require_relative "checks_schema"
require_relative "checks_data"
require_relative "checks_queries"
require_relative "checks_more"
require_relative "checks_extra"
require_relative "checks_migrate_down"

_, failed = Checks.run(FILTER)
exit(failed.zero? ? 0 : 1)
