# A small runner for named checks (scripts/rails.sh runs the same checks
# against Ladle and MariaDB and compares them).
#
# Each check is a block that asserts what ActiveRecord must do and returns
# the values it observed. The runner prints one line per check:
#
#   CHECK <name> pass <observed values as JSON>
#   CHECK <name> fail <exception class: message>
#
# so the two servers can be compared check by check. The checks run in
# the order they are declared: later ones build on the rows and schema of
# earlier ones, as an application does.
require "json"

module Checks
  class Failed < StandardError; end

  @checks = []

  class << self
    attr_reader :checks

    def check(name, &block)
      @checks << [name, block]
    end

    # run(filter): runs every check whose name contains filter (all when nil);
    # returns [passed, failed].
    def run(filter = nil)
      passed = failed = 0
      @checks.each do |name, block|
        next if filter && !name.include?(filter)

        begin
          observed = block.call
          puts "CHECK #{name} pass #{JSON.generate(plain(observed))}"
          passed += 1
        rescue Exception => e # rubocop:disable Lint/RescueException -- a check must never end the run
          raise if e.is_a?(Interrupt)

          message = "#{e.class}: #{e.message}"
          message += " [SQL: #{e.sql}]" if e.respond_to?(:sql) && e.sql
          message = message.gsub(/\s+/, " ")[0, 800]
          puts "CHECK #{name} fail #{message}"
          warn "#{name}: #{message}\n  #{e.backtrace.first(6).join("\n  ")}"
          failed += 1
          recover
        end
        $stdout.flush
      end
      puts "TOTAL #{passed} passed #{failed} failed"
      [passed, failed]
    end

    # A failed check may leave a transaction open; the next one starts clean.
    def recover
      conn = ActiveRecord::Base.connection
      conn.rollback_transaction while conn.transaction_open?
    rescue StandardError
      ActiveRecord::Base.connection_pool.disconnect!
    end

    # Values made comparable as JSON: BigDecimal as its string, times in
    # UTC ISO 8601 with microseconds, symbols as strings.
    def plain(value)
      case value
      when Hash then value.to_h { |k, v| [k.to_s, plain(v)] }
      when Array then value.map { |v| plain(v) }
      when BigDecimal then "#{value.to_s('F')}d"
      when Time, DateTime then value.utc.strftime("%Y-%m-%d %H:%M:%S.%6N")
      when Date then value.iso8601
      when Symbol then value.to_s
      else value
      end
    end
  end

  # expect(actual, expected, what): fails the check unless actual == expected.
  def self.expect(actual, expected, what = "value")
    return actual if actual == expected

    raise Failed, "#{what}: expected #{expected.inspect}, got #{actual.inspect}"
  end

  # raises(klass) { ... }: the class name of the error the block raised;
  # fails the check unless it is a klass.
  def self.raises(klass)
    yield
  rescue klass => e
    e.class.name
  else
    raise Failed, "expected #{klass} to be raised"
  end
end

def check(name, &block)
  Checks.check(name, &block)
end

def expect(actual, expected, what = "value")
  Checks.expect(actual, expected, what)
end

def raises(klass, &block)
  Checks.raises(klass, &block)
end
