//! The functions Ladle evaluates: [`Func`], looking one up by its SQL
//! name with its argument counts, and the interval unit codes the planner
//! compiles DATE_ADD and TIMESTAMPDIFF units to.

/// A scalar function (the planner resolves names with [`Func::by_name`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    Coalesce,
    IfNull,
    /// FIELD(x, a, b, ...): the 1-based position of x in the list, else 0.
    Field,
    NullIf,
    If,
    Concat,
    ConcatWs,
    Lower,
    Upper,
    Length,
    CharLength,
    Substring,
    Left,
    Right,
    Trim,
    LTrim,
    RTrim,
    Replace,
    Abs,
    Round,
    Truncate,
    Floor,
    Ceil,
    Greatest,
    Least,
    Now,
    UtcTimestamp,
    CurDate,
    CurTime,
    UnixTimestamp,
    FromUnixTime,
    Date,
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    /// DATE_ADD(date, seconds-or-months encoded by the planner): args are
    /// (date, amount, unit code).
    DateAdd,
    Rand,
    Sign,
    Mod,
    Pow,
    Sqrt,
    /// SIN .. DEGREES: one DOUBLE argument, NULL outside the domain.
    Sin,
    Cos,
    Tan,
    Cot,
    Asin,
    Acos,
    /// ATAN(x) or ATAN(y, x); ATAN2(y, x).
    Atan,
    Exp,
    /// LN(x), LOG(x), LOG(b, x), LOG2(x), LOG10(x).
    Ln,
    Log,
    Log2,
    Log10,
    Degrees,
    Radians,
    Pi,
    /// REGEXP_LIKE(s, pattern, match_type): `match_type` letters as MySQL's
    /// (c case-sensitive, i insensitive, m multi-line, n `.` matches a
    /// newline; the last of c/i wins). `s REGEXP p` compiles to it with the
    /// comparison's collation as the default.
    RegexpLike,
    /// REGEXP_REPLACE(s, pattern, replacement).
    RegexpReplace,
    /// QUARTER, WEEKDAY (0 = Monday), DAYOFYEAR, MICROSECOND.
    Quarter,
    Weekday,
    DayOfYear,
    Microsecond,
    /// WEEK(d[, mode]) and YEARWEEK(d[, mode]) with MySQL's eight modes.
    Week,
    YearWeek,
    /// MAKEDATE(year, day_of_year).
    MakeDate,
    /// TIME(x): the time part; TIME_TO_SEC(t).
    TimeOf,
    TimeToSec,
    /// MD5(s), SHA1(s)/SHA(s), SHA2(s, bits): lower-case hex digests.
    Md5,
    Sha1,
    Sha2,
    /// ORD(s): the first character's bytes as a big-endian number.
    Ord,
    Locate,
    Instr,
    Repeat,
    Reverse,
    Lpad,
    Rpad,
    Hex,
    /// UNHEX(s): the bytes a hex string spells (a binary string).
    Unhex,
    DateFormat,
    DayOfWeek,
    MonthName,
    DayName,
    DateDiff,
    /// CONVERT_TZ(dt, from, to) between numeric offsets ('+02:00') and
    /// 'SYSTEM' (UTC here). Named zones give NULL, as on a MySQL or
    /// MariaDB server without time zone tables (Django probes
    /// `CONVERT_TZ(.., 'UTC', 'UTC') IS NOT NULL` for them).
    ConvertTz,
    /// TIMESTAMPDIFF(unit, a, b): whole units from `a` to `b` (the unit
    /// is compiled to a `UNIT_*` literal; not callable by name).
    TimestampDiff,
    /// `(row count, value)` of a scalar subquery without an aggregate: the
    /// value, or MySQL's error 1242 when the subquery had several rows.
    /// Volatile so that the planner checks it at read time, not while
    /// maintaining state. Not callable from SQL.
    SingleRow,
    /// JSON_EXTRACT(doc, path, ...), also `doc -> path`.
    JsonExtract,
    /// JSON_UNQUOTE(s), also `doc ->> path` over JSON_EXTRACT.
    JsonUnquote,
    /// JSON_CONTAINS(target, candidate[, path]).
    JsonContains,
    /// JSON_CONTAINS_PATH(doc, 'one' | 'all', path, ...).
    JsonContainsPath,
    JsonType,
    JsonValid,
    /// JSON_LENGTH(doc[, path]), JSON_KEYS(doc[, path]), JSON_DEPTH(doc).
    JsonLength,
    JsonKeys,
    JsonDepth,
    /// TO_DAYS(d), FROM_DAYS(n), TO_SECONDS(d), LAST_DAY(d) (see `dates`).
    ToDays,
    FromDays,
    ToSeconds,
    LastDay,
    /// TIMESTAMP(x) or TIMESTAMP(d, t).
    Timestamp,
    /// STR_TO_DATE(s, format): DATE, TIME or DATETIME by the format.
    StrToDate,
}

/// Interval units for DATE_ADD (the third argument, as an integer code).
pub const UNIT_MICROSECOND: i64 = 0;
pub const UNIT_SECOND: i64 = 1;
pub const UNIT_MINUTE: i64 = 2;
pub const UNIT_HOUR: i64 = 3;
pub const UNIT_DAY: i64 = 4;
pub const UNIT_WEEK: i64 = 5;
pub const UNIT_MONTH: i64 = 6;
pub const UNIT_QUARTER: i64 = 7;
pub const UNIT_YEAR: i64 = 8;

/// What looking a function up by name found.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    Found(Func),
    /// A built-in called with too few or too many arguments (MySQL's 1582).
    WrongArgCount,
    /// A MySQL or MariaDB built-in Ladle does not evaluate yet (1235).
    Unimplemented,
    /// No built-in has this name (1305: MariaDB looks for a stored
    /// function of that name).
    Unknown,
}

/// Built-ins Ladle does not evaluate yet, with their argument counts, so
/// that a wrong count still gets MySQL's 1582 rather than "unsupported".
const UNIMPLEMENTED_ARITY: &[(&str, usize, usize)] = &[("sleep", 1, 1)];

impl Func {
    /// Looks a function up by its SQL name (one part: a name with its
    /// database is never a built-in) and checks the argument count.
    pub fn by_name(name: &str, nargs: usize) -> Lookup {
        let n = name.to_ascii_lowercase();
        let (found, min, max) = match Func::signature(&n) {
            Some((f, min, max)) => (Some(f), min, max),
            None => match UNIMPLEMENTED_ARITY.iter().find(|(u, ..)| *u == n) {
                Some(&(_, min, max)) => (None, min, max),
                None if super::builtin_names::is_builtin(&n) => return Lookup::Unimplemented,
                None => return Lookup::Unknown,
            },
        };
        match found {
            _ if nargs < min || nargs > max => Lookup::WrongArgCount,
            Some(f) => Lookup::Found(f),
            None => Lookup::Unimplemented,
        }
    }

    /// A function by its lower-case SQL name, with its least and most
    /// argument counts.
    fn signature(n: &str) -> Option<(Func, usize, usize)> {
        use Func::*;
        Some(match n {
            "coalesce" => (Coalesce, 1, usize::MAX),
            "ifnull" => (IfNull, 2, 2),
            "nullif" => (NullIf, 2, 2),
            "field" => (Field, 2, usize::MAX),
            "if" => (If, 3, 3),
            "concat" => (Concat, 1, usize::MAX),
            "concat_ws" => (ConcatWs, 2, usize::MAX),
            "lower" | "lcase" => (Lower, 1, 1),
            "upper" | "ucase" => (Upper, 1, 1),
            "length" | "octet_length" => (Length, 1, 1),
            "char_length" | "character_length" => (CharLength, 1, 1),
            "substring" | "substr" | "mid" => (Substring, 2, 3),
            "left" => (Left, 2, 2),
            "right" => (Right, 2, 2),
            "trim" => (Trim, 1, 1),
            "ltrim" => (LTrim, 1, 1),
            "rtrim" => (RTrim, 1, 1),
            "replace" => (Replace, 3, 3),
            "abs" => (Abs, 1, 1),
            "round" => (Round, 1, 2),
            "truncate" => (Truncate, 2, 2),
            "floor" => (Floor, 1, 1),
            "ceil" | "ceiling" => (Ceil, 1, 1),
            "greatest" => (Greatest, 2, usize::MAX),
            "least" => (Least, 2, usize::MAX),
            "now" | "current_timestamp" | "localtimestamp" | "localtime" | "sysdate" => (Now, 0, 1),
            "utc_timestamp" => (UtcTimestamp, 0, 1),
            "curdate" | "current_date" | "utc_date" => (CurDate, 0, 0),
            "curtime" | "current_time" | "utc_time" => (CurTime, 0, 1),
            "unix_timestamp" => (UnixTimestamp, 0, 1),
            "from_unixtime" => (FromUnixTime, 1, 1),
            "date" => (Date, 1, 1),
            "year" => (Year, 1, 1),
            "month" => (Month, 1, 1),
            "day" | "dayofmonth" => (Day, 1, 1),
            "hour" => (Hour, 1, 1),
            "minute" => (Minute, 1, 1),
            "second" => (Second, 1, 1),
            "rand" => (Rand, 0, 1),
            "sign" => (Sign, 1, 1),
            "mod" => (Mod, 2, 2),
            "pow" | "power" => (Pow, 2, 2),
            "sqrt" => (Sqrt, 1, 1),
            "sin" => (Sin, 1, 1),
            "cos" => (Cos, 1, 1),
            "tan" => (Tan, 1, 1),
            "cot" => (Cot, 1, 1),
            "asin" => (Asin, 1, 1),
            "acos" => (Acos, 1, 1),
            "atan" => (Atan, 1, 2),
            "atan2" => (Atan, 2, 2),
            "exp" => (Exp, 1, 1),
            "ln" => (Ln, 1, 1),
            "log" => (Log, 1, 2),
            "log2" => (Log2, 1, 1),
            "log10" => (Log10, 1, 1),
            "degrees" => (Degrees, 1, 1),
            "radians" => (Radians, 1, 1),
            "pi" => (Pi, 0, 0),
            "regexp_like" => (RegexpLike, 2, 3),
            "regexp_replace" => (RegexpReplace, 3, 3),
            "quarter" => (Quarter, 1, 1),
            "weekday" => (Weekday, 1, 1),
            "dayofyear" => (DayOfYear, 1, 1),
            "microsecond" => (Microsecond, 1, 1),
            "week" => (Week, 1, 2),
            "yearweek" => (YearWeek, 1, 2),
            "makedate" => (MakeDate, 2, 2),
            "time" => (TimeOf, 1, 1),
            "time_to_sec" => (TimeToSec, 1, 1),
            "md5" => (Md5, 1, 1),
            "sha1" | "sha" => (Sha1, 1, 1),
            "sha2" => (Sha2, 2, 2),
            "ord" => (Ord, 1, 1),
            "locate" => (Locate, 2, 2),
            "instr" => (Instr, 2, 2),
            "repeat" => (Repeat, 2, 2),
            "reverse" => (Reverse, 1, 1),
            "lpad" => (Lpad, 3, 3),
            "rpad" => (Rpad, 3, 3),
            "hex" => (Hex, 1, 1),
            "unhex" => (Unhex, 1, 1),
            "date_format" => (DateFormat, 2, 2),
            "dayofweek" => (DayOfWeek, 1, 1),
            "monthname" => (MonthName, 1, 1),
            "dayname" => (DayName, 1, 1),
            "datediff" => (DateDiff, 2, 2),
            "convert_tz" => (ConvertTz, 3, 3),
            "json_extract" => (JsonExtract, 2, usize::MAX),
            "json_unquote" => (JsonUnquote, 1, 1),
            "json_contains" => (JsonContains, 2, 3),
            "json_contains_path" => (JsonContainsPath, 3, usize::MAX),
            "json_type" => (JsonType, 1, 1),
            "json_valid" => (JsonValid, 1, 1),
            "json_length" => (JsonLength, 1, 2),
            "json_keys" => (JsonKeys, 1, 2),
            "json_depth" => (JsonDepth, 1, 1),
            "to_days" => (ToDays, 1, 1),
            "from_days" => (FromDays, 1, 1),
            "to_seconds" => (ToSeconds, 1, 1),
            "last_day" => (LastDay, 1, 1),
            "timestamp" => (Timestamp, 1, 2),
            "str_to_date" => (StrToDate, 2, 2),
            _ => return None,
        })
    }

    pub fn is_volatile(self) -> bool {
        matches!(
            self,
            Func::Now | Func::UtcTimestamp | Func::CurDate | Func::CurTime | Func::Rand
        ) || self == Func::UnixTimestamp
            || self == Func::SingleRow
    }
}
