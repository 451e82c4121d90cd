//! One SQL surface over both backends: the embedded SQLite file and a PostgreSQL
//! server. Store code writes each statement once, with SQLite's numbered parameters
//! (`?1`), plain values ([`Value`], built by [`args!`]) and column reads through
//! [`Row::get`]; this module turns the parameters into PostgreSQL's `$1`, gives each
//! value the type PostgreSQL inferred for its place, and caches prepared statements
//! per PostgreSQL connection (a statement sent as text would cost a second round trip).
//!
//! Both sides keep integers as 64-bit (`BIGINT` on PostgreSQL) and flags as integers,
//! so a statement that compares `disabled = 0` means the same on both.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;

use futures_executor::block_on;
use rusqlite::types::{ToSqlOutput, ValueRef};
use tokio_postgres::types::{IsNull, ToSql as PgToSql, Type, to_sql_checked};

use super::{Result, StoreError};

/// A parameter or a column's value, the same on both backends.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Int(i64),
    Real(f64),
    Text(Cow<'a, str>),
    Blob(Cow<'a, [u8]>),
}

/// `args![a, b, c]`: a statement's parameters, in `?1`, `?2`... order.
macro_rules! args {
    () => { &[] as &[$crate::store::db::Value<'_>] };
    ($($v:expr),+ $(,)?) => { &[$($crate::store::db::Value::from($v)),+] as &[$crate::store::db::Value<'_>] };
}
pub(crate) use args;

macro_rules! int_value {
    ($($t:ty),*) => {$(
        impl From<$t> for Value<'_> {
            fn from(v: $t) -> Self {
                Value::Int(v as i64)
            }
        }
        impl From<&$t> for Value<'_> {
            fn from(v: &$t) -> Self {
                Value::Int(*v as i64)
            }
        }
    )*};
}
int_value!(i64, i32, u32, u16, u8);

impl From<u64> for Value<'_> {
    fn from(v: u64) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<usize> for Value<'_> {
    fn from(v: usize) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<bool> for Value<'_> {
    fn from(v: bool) -> Self {
        Value::Int(i64::from(v))
    }
}

impl From<f64> for Value<'_> {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(v: &'a str) -> Self {
        Value::Text(Cow::Borrowed(v))
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(v: &'a String) -> Self {
        Value::Text(Cow::Borrowed(v))
    }
}

impl From<String> for Value<'_> {
    fn from(v: String) -> Self {
        Value::Text(Cow::Owned(v))
    }
}

impl<'a> From<&'a [u8]> for Value<'a> {
    fn from(v: &'a [u8]) -> Self {
        Value::Blob(Cow::Borrowed(v))
    }
}

impl From<Vec<u8>> for Value<'_> {
    fn from(v: Vec<u8>) -> Self {
        Value::Blob(Cow::Owned(v))
    }
}

impl<'a, T: Into<Value<'a>>> From<Option<T>> for Value<'a> {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

impl rusqlite::ToSql for Value<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(s) => ValueRef::Text(s.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl PgToSql for Value<'_> {
    /// Converts to the type PostgreSQL inferred for the parameter's place: an integer
    /// compared with an `INTEGER` column goes as `int4`, one bound to `BOOLEAN` as a bool.
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> std::result::Result<IsNull, BoxError> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                Type::FLOAT4 => (*i as f32).to_sql(ty, out),
                Type::TEXT | Type::VARCHAR => i.to_string().to_sql(ty, out),
                _ => Err(format!("an integer cannot be stored as {ty}").into()),
            },
            Value::Real(f) => match *ty {
                Type::FLOAT8 => f.to_sql(ty, out),
                Type::FLOAT4 => (*f as f32).to_sql(ty, out),
                _ => Err(format!("a real number cannot be stored as {ty}").into()),
            },
            Value::Text(s) => match *ty {
                Type::BYTEA => s.as_bytes().to_sql(ty, out),
                _ => s.as_ref().to_sql(ty, out),
            },
            Value::Blob(b) => b.as_ref().to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        matches!(
            *ty,
            Type::INT8
                | Type::INT4
                | Type::INT2
                | Type::BOOL
                | Type::FLOAT8
                | Type::FLOAT4
                | Type::TEXT
                | Type::VARCHAR
                | Type::BPCHAR
                | Type::NAME
                | Type::UNKNOWN
                | Type::BYTEA
        )
    }

    to_sql_checked!();
}

/// A column's value read from a PostgreSQL row, whatever its type.
fn pg_value(row: &tokio_postgres::Row, i: usize) -> Result<Value<'static>> {
    let ty = row
        .columns()
        .get(i)
        .ok_or_else(|| StoreError::Internal(format!("no column {i} in the row")))?
        .type_()
        .clone();
    let value = match ty {
        Type::INT8 => row.try_get::<_, Option<i64>>(i)?.map(Value::Int),
        Type::INT4 => row.try_get::<_, Option<i32>>(i)?.map(|v| Value::Int(v.into())),
        Type::INT2 => row.try_get::<_, Option<i16>>(i)?.map(|v| Value::Int(v.into())),
        Type::BOOL => row.try_get::<_, Option<bool>>(i)?.map(|v| Value::Int(v.into())),
        Type::FLOAT8 => row.try_get::<_, Option<f64>>(i)?.map(Value::Real),
        Type::FLOAT4 => row.try_get::<_, Option<f32>>(i)?.map(|v| Value::Real(v.into())),
        Type::BYTEA => row
            .try_get::<_, Option<Vec<u8>>>(i)?
            .map(|v| Value::Blob(Cow::Owned(v))),
        _ => row.try_get::<_, Option<String>>(i)?.map(|v| Value::Text(Cow::Owned(v))),
    };
    Ok(value.unwrap_or(Value::Null))
}

/// A Rust type a column can be read into, on either backend.
pub(crate) trait FromColumn: rusqlite::types::FromSql + Sized {
    fn from_value(v: Value<'static>) -> std::result::Result<Self, String>;
}

fn mismatch<T>(want: &str, got: &Value<'_>) -> std::result::Result<T, String> {
    Err(format!("expected {want}, the column holds {got:?}"))
}

macro_rules! int_column {
    ($($t:ty),*) => {$(
        impl FromColumn for $t {
            fn from_value(v: Value<'static>) -> std::result::Result<Self, String> {
                match v {
                    Value::Int(i) => <$t>::try_from(i).map_err(|e| e.to_string()),
                    other => mismatch("an integer", &other),
                }
            }
        }
    )*};
}
int_column!(i64, i32, u32, u64, u16, u8, usize);

impl FromColumn for bool {
    fn from_value(v: Value<'static>) -> std::result::Result<Self, String> {
        match v {
            Value::Int(i) => Ok(i != 0),
            other => mismatch("a flag", &other),
        }
    }
}

impl FromColumn for f64 {
    fn from_value(v: Value<'static>) -> std::result::Result<Self, String> {
        match v {
            Value::Real(f) => Ok(f),
            Value::Int(i) => Ok(i as f64),
            other => mismatch("a number", &other),
        }
    }
}

impl FromColumn for String {
    fn from_value(v: Value<'static>) -> std::result::Result<Self, String> {
        match v {
            Value::Text(s) => Ok(s.into_owned()),
            other => mismatch("text", &other),
        }
    }
}

impl FromColumn for Vec<u8> {
    fn from_value(v: Value<'static>) -> std::result::Result<Self, String> {
        match v {
            Value::Blob(b) => Ok(b.into_owned()),
            Value::Text(s) => Ok(s.into_owned().into_bytes()),
            other => mismatch("bytes", &other),
        }
    }
}

impl<T: FromColumn> FromColumn for Option<T> {
    fn from_value(v: Value<'static>) -> std::result::Result<Self, String> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

/// One result row.
pub(crate) enum Row<'r, 's> {
    Sqlite(&'r rusqlite::Row<'s>),
    Postgres(&'r tokio_postgres::Row),
}

impl Row<'_, '_> {
    pub(crate) fn get<T: FromColumn>(&self, i: usize) -> Result<T> {
        match self {
            Row::Sqlite(r) => Ok(r.get(i)?),
            Row::Postgres(r) => T::from_value(pg_value(r, i)?)
                .map_err(|why| StoreError::Internal(format!("column {i} ({}): {why}", r.columns()[i].name()))),
        }
    }
}

/// A PostgreSQL connection with the statements it has prepared. Its socket is driven
/// by the pool's runtime thread; calls here only wait for answers (`block_on` parks the
/// calling thread without entering any runtime, so it works on any thread).
pub(crate) struct PgConn {
    client: tokio_postgres::Client,
    statements: HashMap<String, tokio_postgres::Statement>,
    /// Left in a state no later call may inherit (a transaction that would not roll back).
    broken: bool,
}

impl PgConn {
    pub(crate) fn new(client: tokio_postgres::Client) -> PgConn {
        PgConn {
            client,
            statements: HashMap::new(),
            broken: false,
        }
    }

    /// Whether the pool must drop this connection instead of lending it again.
    pub(crate) fn is_unusable(&self) -> bool {
        self.broken || self.client.is_closed()
    }

    fn statement(&mut self, sql: &str) -> Result<tokio_postgres::Statement> {
        if let Some(s) = self.statements.get(sql) {
            return Ok(s.clone());
        }
        let prepared = block_on(self.client.prepare(&numbered_params(sql)))?;
        self.statements.insert(sql.to_owned(), prepared.clone());
        Ok(prepared)
    }

    fn query(&mut self, sql: &str, args: &[Value<'_>]) -> Result<Vec<tokio_postgres::Row>> {
        let statement = self.statement(sql)?;
        Ok(block_on(self.client.query(&statement, &pg_params(args)))?)
    }

    fn execute(&mut self, sql: &str, args: &[Value<'_>]) -> Result<u64> {
        let statement = self.statement(sql)?;
        Ok(block_on(self.client.execute(&statement, &pg_params(args)))?)
    }

    pub(crate) fn batch(&mut self, sql: &str) -> Result<()> {
        Ok(block_on(self.client.batch_execute(sql))?)
    }
}

/// Parameters as tokio-postgres takes them.
fn pg_params<'a>(args: &'a [Value<'_>]) -> Vec<&'a (dyn PgToSql + Sync)> {
    args.iter().map(|a| a as &(dyn PgToSql + Sync)).collect()
}

/// Which backend a connection is on, for the few statements that differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

/// A connection of either backend, as store code uses it.
pub(crate) enum Conn<'c> {
    Sqlite(&'c rusqlite::Connection),
    Postgres(&'c RefCell<PgConn>),
}

impl Conn<'_> {
    pub(crate) fn dialect(&self) -> Dialect {
        match self {
            Conn::Sqlite(_) => Dialect::Sqlite,
            Conn::Postgres(_) => Dialect::Postgres,
        }
    }

    /// Runs a statement; how many rows it changed.
    pub(crate) fn execute(&self, sql: &str, args: &[Value<'_>]) -> Result<u64> {
        match self {
            Conn::Sqlite(c) => Ok(c
                .prepare_cached(sql)?
                .execute(rusqlite::params_from_iter(args.iter()))? as u64),
            Conn::Postgres(c) => c.borrow_mut().execute(sql, args),
        }
    }

    /// Every row, each turned into a `T` by `f`.
    pub(crate) fn query_all<T>(
        &self,
        sql: &str,
        args: &[Value<'_>],
        mut f: impl FnMut(&Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        match self {
            Conn::Sqlite(c) => {
                let mut statement = c.prepare_cached(sql)?;
                let mut rows = statement.query(rusqlite::params_from_iter(args.iter()))?;
                let mut out = Vec::new();
                while let Some(r) = rows.next()? {
                    out.push(f(&Row::Sqlite(r))?);
                }
                Ok(out)
            }
            Conn::Postgres(c) => {
                let rows = c.borrow_mut().query(sql, args)?;
                rows.iter().map(|r| f(&Row::Postgres(r))).collect()
            }
        }
    }

    /// The first row, if there is one.
    pub(crate) fn query_opt<T>(
        &self,
        sql: &str,
        args: &[Value<'_>],
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<Option<T>> {
        match self {
            Conn::Sqlite(c) => {
                let mut statement = c.prepare_cached(sql)?;
                let mut rows = statement.query(rusqlite::params_from_iter(args.iter()))?;
                match rows.next()? {
                    Some(r) => f(&Row::Sqlite(r)).map(Some),
                    None => Ok(None),
                }
            }
            Conn::Postgres(c) => {
                let rows = c.borrow_mut().query(sql, args)?;
                rows.first().map(|r| f(&Row::Postgres(r))).transpose()
            }
        }
    }

    /// The first row; a statement that returns none is a bug in the caller.
    pub(crate) fn query_one<T>(&self, sql: &str, args: &[Value<'_>], f: impl FnOnce(&Row) -> Result<T>) -> Result<T> {
        self.query_opt(sql, args, f)?
            .ok_or_else(|| StoreError::Internal(format!("no row from: {}", first_line(sql))))
    }

    /// Several statements without parameters, as one string.
    pub(crate) fn batch(&self, sql: &str) -> Result<()> {
        match self {
            Conn::Sqlite(c) => Ok(c.execute_batch(sql)?),
            Conn::Postgres(c) => c.borrow_mut().batch(sql),
        }
    }

    /// Runs `f` in a transaction: committed if it returns `Ok`, rolled back otherwise.
    /// SQLite takes its write lock at the start (`IMMEDIATE`), so two writers never
    /// deadlock upgrading a read.
    pub(crate) fn in_tx<T>(&self, f: impl FnOnce(&Conn) -> Result<T>) -> Result<T> {
        let begin = match self.dialect() {
            Dialect::Sqlite => "BEGIN IMMEDIATE",
            Dialect::Postgres => "BEGIN",
        };
        self.batch(begin)?;
        // A failed COMMIT (SQLite busy, a PostgreSQL serialization failure) leaves the
        // transaction open: it is rolled back like a failed body.
        let result = f(self).and_then(|v| self.batch("COMMIT").map(|()| v));
        if result.is_err()
            && self.batch("ROLLBACK").is_err()
            && let Conn::Postgres(c) = self
        {
            // Still inside a transaction we cannot end: the pool must not lend it again.
            c.borrow_mut().broken = true;
        }
        // The error that ended the transaction is the one to report.
        result
    }
}

fn first_line(sql: &str) -> &str {
    sql.trim().lines().next().unwrap_or_default()
}

/// SQLite's `?N` (and bare `?`) parameters as PostgreSQL's `$N`, leaving quoted text
/// and identifiers alone.
pub(crate) fn numbered_params(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut next = 1;
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(ch) = chars.next() {
        match (quote, ch) {
            (Some(q), c) if c == q => {
                quote = None;
                out.push(c);
            }
            (Some(_), c) => out.push(c),
            (None, '\'' | '"') => {
                quote = Some(ch);
                out.push(ch);
            }
            (None, '?') => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                out.push('$');
                if digits.is_empty() {
                    out.push_str(&next.to_string());
                    next += 1;
                } else {
                    out.push_str(&digits);
                }
            }
            (None, c) => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_numbered_for_postgres_outside_quotes() {
        assert_eq!(
            numbered_params("SELECT a FROM t WHERE b = ?1 AND c = ?12"),
            "SELECT a FROM t WHERE b = $1 AND c = $12"
        );
        assert_eq!(numbered_params("VALUES (?, ?)"), "VALUES ($1, $2)");
        assert_eq!(
            numbered_params("SELECT '?1', \"a?\" FROM t WHERE x = ?2"),
            "SELECT '?1', \"a?\" FROM t WHERE x = $2"
        );
    }

    #[test]
    fn values_convert_from_what_store_code_holds() {
        let name = String::from("pc-1");
        let none: Option<&str> = None;
        let got: &[Value<'_>] = args![1i64, 2u32, true, "x", &name, none, Some(3i64), 0.5f64];
        assert_eq!(
            got,
            &[
                Value::Int(1),
                Value::Int(2),
                Value::Int(1),
                Value::Text("x".into()),
                Value::Text("pc-1".into()),
                Value::Null,
                Value::Int(3),
                Value::Real(0.5)
            ]
        );
        assert_eq!(Value::from(u64::MAX), Value::Int(i64::MAX));
    }

    #[test]
    fn columns_read_back_into_rust_types_or_say_why_not() {
        assert_eq!(i64::from_value(Value::Int(7)), Ok(7));
        assert_eq!(bool::from_value(Value::Int(0)), Ok(false));
        assert_eq!(Option::<String>::from_value(Value::Null), Ok(None));
        assert_eq!(u32::from_value(Value::Int(-1)).map_err(|e| !e.is_empty()), Err(true));
        assert!(String::from_value(Value::Int(1)).unwrap_err().contains("expected text"));
    }

    #[test]
    fn sqlite_statements_run_through_the_shared_surface() {
        let raw = rusqlite::Connection::open_in_memory().unwrap();
        let c = Conn::Sqlite(&raw);
        c.batch("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL, flag INTEGER NOT NULL)")
            .unwrap();
        assert_eq!(
            c.execute("INSERT INTO t (name, flag) VALUES (?1, ?2)", args!["a", true])
                .unwrap(),
            1
        );
        let id: i64 = c
            .query_one(
                "INSERT INTO t (name, flag) VALUES (?1, ?2) RETURNING id",
                args!["b", false],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(id, 2);
        let rows = c
            .query_all("SELECT name, flag FROM t ORDER BY id", args![], |r| {
                Ok((r.get::<String>(0)?, r.get::<bool>(1)?))
            })
            .unwrap();
        assert_eq!(rows, vec![("a".to_owned(), true), ("b".to_owned(), false)]);
        // A failed transaction leaves nothing behind.
        let failed = c.in_tx(|tx| {
            tx.execute("INSERT INTO t (name, flag) VALUES (?1, 0)", args!["c"])?;
            Err::<(), _>(StoreError::Conflict("stop".into()))
        });
        assert!(failed.is_err());
        let count: i64 = c.query_one("SELECT count(*) FROM t", args![], |r| r.get(0)).unwrap();
        assert_eq!(count, 2);
        assert_eq!(
            c.query_opt("SELECT name FROM t WHERE id = ?1", args![9], |r| r.get::<String>(0))
                .unwrap(),
            None
        );
    }
}
