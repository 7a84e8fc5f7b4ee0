//! LEB128 varints: 7 bits per byte, low bits first, high bit set on every byte but the last.
//!
//! Decoders take untrusted bytes: they return `None` on a truncated or over-long encoding instead
//! of panicking, and callers turn that into a corruption error with a position.

/// Appends `v` as a LEB128 varint (1..=5 bytes): the same bytes as [`put_u64`] of it.
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    put_u64(out, u64::from(v));
}

/// Decodes a u32 varint at `*pos`, advancing `*pos` past it.
#[inline(always)]
pub fn get_u32(buf: &[u8], pos: &mut usize) -> Option<u32> {
    // Lengths in blocks are almost always below 128: one byte, no loop.
    match buf.get(*pos) {
        Some(&b) if b < 0x80 => {
            *pos += 1;
            Some(u32::from(b))
        }
        _ => get_u32_multi(buf, pos),
    }
}

#[inline(never)]
fn get_u32_multi(buf: &[u8], pos: &mut usize) -> Option<u32> {
    let mut result: u32 = 0;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift == 28 && b > 0x0f {
            return None; // more than 32 bits
        }
        result |= u32::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(result);
        }
        shift += 7;
        if shift > 28 {
            return None;
        }
    }
}

/// Appends `v` as a LEB128 varint (1..=10 bytes).
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Decodes a u64 varint at `*pos`, advancing `*pos` past it.
#[inline(always)]
pub fn get_u64(buf: &[u8], pos: &mut usize) -> Option<u64> {
    match buf.get(*pos) {
        Some(&b) if b < 0x80 => {
            *pos += 1;
            Some(u64::from(b))
        }
        _ => get_u64_multi(buf, pos),
    }
}

#[inline(never)]
fn get_u64_multi(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut result: u64 = 0;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        if shift == 63 && b > 0x01 {
            return None; // more than 64 bits
        }
        result |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(result);
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
}

/// Reads a little-endian u64 at `*pos`.
#[inline]
pub fn get_fixed_u64(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let end = pos.checked_add(8)?;
    let bytes: [u8; 8] = buf.get(*pos..end)?.try_into().ok()?;
    *pos = end;
    Some(u64::from_le_bytes(bytes))
}

/// Reads a little-endian u32 at `*pos`.
#[inline]
pub fn get_fixed_u32(buf: &[u8], pos: &mut usize) -> Option<u32> {
    let end = pos.checked_add(4)?;
    let bytes: [u8; 4] = buf.get(*pos..end)?.try_into().ok()?;
    *pos = end;
    Some(u32::from_le_bytes(bytes))
}

/// Reads `len` bytes at `*pos` as a sub-range of `buf`.
#[inline]
pub fn get_slice<'a>(buf: &'a [u8], pos: &mut usize, len: usize) -> Option<&'a [u8]> {
    let end = pos.checked_add(len)?;
    let s = buf.get(*pos..end)?;
    *pos = end;
    Some(s)
}

/// Reads a varint length and then that many bytes.
#[inline]
pub fn get_len_prefixed<'a>(buf: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let len = get_u32(buf, pos)? as usize;
    get_slice(buf, pos, len)
}

/// Appends a varint length and the bytes.
pub fn put_len_prefixed(out: &mut Vec<u8>, data: &[u8]) {
    put_u32(out, data.len() as u32);
    out.extend_from_slice(data);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn u32_round_trips(v: u32) {
            let mut out = Vec::new();
            put_u32(&mut out, v);
            let mut pos = 0;
            prop_assert_eq!(get_u32(&out, &mut pos), Some(v));
            prop_assert_eq!(pos, out.len());
        }

        #[test]
        fn u64_round_trips(v: u64) {
            let mut out = Vec::new();
            put_u64(&mut out, v);
            let mut pos = 0;
            prop_assert_eq!(get_u64(&out, &mut pos), Some(v));
            prop_assert_eq!(pos, out.len());
            prop_assert_eq!(get_u64(&out[..out.len() - 1], &mut 0), None);
        }

        #[test]
        fn truncated_u32_is_none(v in 128u32..) {
            let mut out = Vec::new();
            put_u32(&mut out, v);
            let mut pos = 0;
            prop_assert_eq!(get_u32(&out[..out.len() - 1], &mut pos), None);
        }
    }

    #[test]
    fn over_long_u64_is_rejected() {
        let mut max = vec![0xff; 9];
        max.push(0x01);
        assert_eq!(get_u64(&max, &mut 0), Some(u64::MAX));
        max[9] = 0x02;
        assert_eq!(get_u64(&max, &mut 0), None);
        let mut eleven = vec![0x80; 10];
        eleven.push(0x01);
        assert_eq!(get_u64(&eleven, &mut 0), None);
    }

    #[test]
    fn over_long_u32_is_rejected() {
        let mut pos = 0;
        assert_eq!(get_u32(&[0xff, 0xff, 0xff, 0xff, 0x1f], &mut pos), None);
        let mut pos = 0;
        assert_eq!(
            get_u32(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01], &mut pos),
            None
        );
    }
}
