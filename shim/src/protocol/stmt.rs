//! Prepared statements on the wire: the COM_STMT_PREPARE reply, long data
//! (COM_STMT_SEND_LONG_DATA, accumulated per parameter until the next
//! execution or COM_STMT_RESET), and COM_STMT_EXECUTE's parameter block
//! (NULL bitmap, the new-params-bound flag with types remembered across
//! executions, values).

use std::collections::HashMap;

use ladle_common::Value;
use tokio::io::AsyncWrite;

use super::codec::{Cursor, Decoded, Malformed};
use super::packet::PacketWriter;
use super::result;
use crate::wire::{bytes_value, param_column, param_value, ColumnDef};

/// What the protocol layer keeps per prepared statement (the engine keeps
/// the plan in the session).
#[derive(Debug, Default)]
pub struct Statement {
    pub params: usize,
    /// Columns announced at prepare time.
    pub columns: usize,
    /// (type, unsigned) of each parameter, from the last execution that
    /// bound them.
    pub param_types: Option<Vec<(u8, bool)>>,
    /// Long data sent for parameters since the last execution.
    pub long_data: HashMap<u16, Vec<u8>>,
    /// Long data named a parameter the statement does not have, or grew
    /// past the limit: the next execution fails.
    pub long_data_error: bool,
}

/// The statements of one connection.
pub type Statements = HashMap<u32, Statement>;

/// COM_STMT_PREPARE's OK reply, then the parameter and column definitions.
pub fn prepare_ok<W: AsyncWrite + Unpin>(
    w: &mut PacketWriter<W>,
    client_caps: u32,
    id: u32,
    params: usize,
    cols: &[ColumnDef],
    warnings: u16,
    status: u16,
) {
    let mut p = vec![0x00];
    p.extend_from_slice(&id.to_le_bytes());
    p.extend_from_slice(&(cols.len().min(usize::from(u16::MAX)) as u16).to_le_bytes());
    p.extend_from_slice(&(params.min(usize::from(u16::MAX)) as u16).to_le_bytes());
    p.push(0);
    p.extend_from_slice(&warnings.to_le_bytes());
    w.packet(&p);
    if params > 0 {
        let defs: Vec<ColumnDef> = (0..params).map(|_| param_column()).collect();
        result::column_definitions(w, client_caps, &defs, status);
    }
    if !cols.is_empty() {
        result::column_definitions(w, client_caps, cols, status);
    }
}

/// The statement id a statement command starts with.
pub fn statement_id(payload: &[u8]) -> Decoded<u32> {
    Cursor::new(payload).u32()
}

/// COM_STMT_SEND_LONG_DATA: (statement id, parameter, data).
pub fn long_data(payload: &[u8]) -> Decoded<(u32, u16, &[u8])> {
    let mut c = Cursor::new(payload);
    let id = c.u32()?;
    let param = c.u16()?;
    Ok((id, param, c.rest()))
}

/// Decodes COM_STMT_EXECUTE's parameter values (`payload` follows the
/// command byte) for `stmt`, consuming its long data. Malformed when the
/// block does not match the statement.
pub fn execute_params(payload: &[u8], stmt: &mut Statement) -> Decoded<Vec<Value>> {
    let long_data = std::mem::take(&mut stmt.long_data);
    if std::mem::take(&mut stmt.long_data_error) {
        return Err(Malformed);
    }
    let mut c = Cursor::new(payload);
    c.u32()?; // statement id
    c.u8()?; // cursor flags: no cursors are opened, results come whole
    c.u32()?; // iteration count, always 1
    let n = stmt.params;
    if n == 0 {
        return Ok(Vec::new());
    }
    let bitmap = c.take(n.div_ceil(8))?;
    if c.u8()? == 1 {
        let mut types = Vec::with_capacity(n);
        for _ in 0..n {
            let t = c.u8()?;
            let flag = c.u8()?;
            types.push((t, flag & 0x80 != 0));
        }
        stmt.param_types = Some(types);
    }
    let Some(types) = stmt.param_types.as_ref().filter(|t| t.len() == n) else {
        return Err(Malformed);
    };
    let mut values = Vec::with_capacity(n);
    for (i, &(t, unsigned)) in types.iter().enumerate() {
        let null = bitmap[i / 8] & (1 << (i % 8)) != 0;
        let long = u16::try_from(i).ok().and_then(|i| long_data.get(&i));
        values.push(match (null, long) {
            (true, _) => Value::Null,
            // A parameter sent as long data is not in the value list.
            (false, Some(data)) => bytes_value(data),
            (false, None) => param_value(&mut c, t, unsigned)?,
        });
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::types;

    fn execute(id: u32, bound: Option<&[(u8, u8)]>, nulls: u8, values: &[u8]) -> Vec<u8> {
        let mut p = id.to_le_bytes().to_vec();
        p.push(0);
        p.extend_from_slice(&1u32.to_le_bytes());
        p.push(nulls);
        match bound {
            Some(ts) => {
                p.push(1);
                for (t, f) in ts {
                    p.extend_from_slice(&[*t, *f]);
                }
            }
            None => p.push(0),
        }
        p.extend_from_slice(values);
        p
    }

    #[test]
    fn types_are_remembered_and_long_data_used() {
        let mut s = Statement {
            params: 2,
            ..Statement::default()
        };
        let first = execute(
            1,
            Some(&[(types::LONGLONG, 0), (types::VAR_STRING, 0)]),
            0,
            &[7, 0, 0, 0, 0, 0, 0, 0, 2, b'h', b'i'],
        );
        assert_eq!(
            execute_params(&first, &mut s),
            Ok(vec![Value::Int(7), Value::text("hi")])
        );
        // Not rebound: the same types; the string comes as long data.
        s.long_data.insert(1, b"long".to_vec());
        let second = execute(1, None, 0, &[0xFF; 8]);
        assert_eq!(
            execute_params(&second, &mut s),
            Ok(vec![Value::Int(-1), Value::text("long")])
        );
        assert!(s.long_data.is_empty());
        // NULL bitmap.
        let third = execute(1, None, 0b11, &[]);
        assert_eq!(
            execute_params(&third, &mut s),
            Ok(vec![Value::Null, Value::Null])
        );
    }

    #[test]
    fn malformed_blocks_are_errors() {
        let mut s = Statement {
            params: 1,
            ..Statement::default()
        };
        // Never bound.
        assert_eq!(
            execute_params(&execute(1, None, 0, &[]), &mut s),
            Err(Malformed)
        );
        // Unknown type, truncated value.
        assert_eq!(
            execute_params(&execute(1, Some(&[(0x42, 0)]), 0, &[1]), &mut s),
            Err(Malformed)
        );
        assert_eq!(
            execute_params(&execute(1, Some(&[(types::LONG, 0)]), 0, &[1]), &mut s),
            Err(Malformed)
        );
        let full = execute(1, Some(&[(types::STRING, 0)]), 0, &[3, b'a', b'b', b'c']);
        for n in 0..full.len() {
            let _ = execute_params(&full[..n], &mut s);
        }
    }
}
