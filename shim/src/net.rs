//! Bytes written outside the protocol layer's connection loop: the error
//! packet refusing a connection over `max_connections` before any
//! greeting.

/// A complete MySQL ERR packet (header included).
pub fn error_packet(seq: u8, errno: u16, sqlstate: &str, message: &str) -> Vec<u8> {
    let payload = crate::protocol::result::error_payload(errno, sqlstate, message);
    let len = payload.len();
    let mut p = vec![
        (len & 0xFF) as u8,
        ((len >> 8) & 0xFF) as u8,
        ((len >> 16) & 0xFF) as u8,
        seq,
    ];
    p.extend_from_slice(&payload);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_packet_layout() {
        let p = error_packet(2, 1040, "08004", "Too many connections");
        assert_eq!(p[3], 2);
        assert_eq!(&p[4..7], &[0xFF, 0x10, 0x04]);
        assert_eq!(&p[7..13], b"#08004");
        assert_eq!(usize::from(p[0]), p.len() - 4);
    }
}
