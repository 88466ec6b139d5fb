//! The `sss` security protocol (XrdSecsss, "simple shared secret"): the client proves it holds a
//! key the server's keytab holds too, by encrypting a fresh, dated identity with it.
//!
//! The credential is a clear 16-byte header ("sss\0", padding, the key name's length, encryption
//! '0' = bf32, the key number), the key name padded with zeros to a multiple of 8 (version 2
//! servers, all since XRootD 5.0), then the encrypted data: 32 random bytes, the time it was made
//! (seconds since 2008-09-23, which the server accepts for a few seconds only), 3 zeros, option 0
//! ("use this identity"), and items `<type byte><u16 length><text\0>`: our address as the server
//! sees it (it binds the credential to this connection), the user and group names, and random
//! padding. bf32 is Blowfish in 64-bit CFB mode with a zero IV over the data and its CRC-32.

use super::keytab::{Keytab, SssKey};
use blowfish::Blowfish;
use cfb_mode::cipher::{AsyncStreamCipher, InnerIvInit};
use std::net::SocketAddr;

/// What a server's login answer says about `sss` (`&P=sss,0.+13:/path`): encryption type '0'
/// (bf32), '+' for a version 2 server, the credential lifetime, and a client keytab it suggests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SssParameters {
    pub v2: bool,
    pub keytab_hint: Option<String>,
}

/// The `sss` parameters in a login answer's security text, if it offers `sss`.
pub fn parameters(security: &str) -> Result<Option<SssParameters>, String> {
    let Some(entry) = security.split("&P=").skip(1).find_map(|p| {
        p.strip_prefix("sss")
            .filter(|r| r.is_empty() || r.starts_with(','))
    }) else {
        return Ok(None);
    };
    let entry = entry.split('&').next().unwrap_or("");
    let parms = entry.strip_prefix(',').unwrap_or(entry);
    let (encryption, rest) = parms.split_once('.').unwrap_or((parms, ""));
    if encryption != "0" {
        return Err(format!(
            "its sss uses encryption '{encryption}', cherenkov knows only bf32 ('0')"
        ));
    }
    let keytab_hint = rest
        .split_once(':')
        .map(|(_, path)| path.trim_end_matches('\0'))
        .filter(|p| p.starts_with('/'))
        .map(str::to_string);
    Ok(Some(SssParameters {
        v2: rest.starts_with('+'),
        keytab_hint,
    }))
}

/// The time origin of `sss` credentials (XrdSecProtocolsss's `baseTime`).
const BASE_TIME: i64 = 1_222_183_880;
/// The header's size and the encrypted data header's (random, time, padding, option).
const HEADER_LEN: usize = 16;
const DATA_HEADER_LEN: usize = 40;
/// The encrypted data is padded to at least this many bytes (XrdSecsssRR_Data::MinDSz).
const MIN_DATA_LEN: usize = 128;
// Item types.
const ITEM_NAME: u8 = 0x01;
const ITEM_GROUPS: u8 = 0x04;
const ITEM_RANDOM: u8 = 0x07;
const ITEM_HOST: u8 = 0x20;
/// The identity XrdCl sends by default: the server takes the user and group from its keytab
/// unless the key says `anybody` / `anygroup`.
const USER: &str = "nobody";
const GROUP: &str = "nogroup";

/// The `kXR_auth` credential proving we hold `keytab`'s key, for a connection whose local end is
/// `local` (what the server sees, unless a proxy or NAT is in between), made at `now` (seconds
/// since the epoch).
pub fn credential(keytab: &Keytab, v2: bool, local: SocketAddr, now: i64) -> Vec<u8> {
    let key = &keytab.key;
    let mut data = vec![0u8; DATA_HEADER_LEN];
    random(&mut data[..32]);
    data[32..36].copy_from_slice(&((now - BASE_TIME) as i32).to_be_bytes());
    push_item(
        &mut data,
        ITEM_HOST,
        address_as_server_sees_it(local).as_bytes(),
    );
    push_item(&mut data, ITEM_NAME, USER.as_bytes());
    push_item(&mut data, ITEM_GROUPS, GROUP.as_bytes());
    // Random padding up to the minimum size (3 bytes of item header, then no closing zero).
    let padding = MIN_DATA_LEN.saturating_sub(data.len() + 3).max(8);
    let mut filler = vec![0u8; padding];
    random(&mut filler);
    filler[0] |= 1; // an item may not start with a zero
    data.push(ITEM_RANDOM);
    data.extend_from_slice(&(padding as u16).to_be_bytes());
    data.extend_from_slice(&filler);

    let mut out = header(key, v2);
    out.extend(bf32_encrypt(&key.bytes(), &data));
    out
}

/// The clear part: protocol, key name length, encryption type, key number, key name.
fn header(key: &SssKey, v2: bool) -> Vec<u8> {
    let name_len = if v2 { (key.name.len() + 8) & !7 } else { 0 };
    let mut out = Vec::with_capacity(HEADER_LEN + name_len);
    out.extend_from_slice(b"sss\0\0\0");
    out.push(name_len as u8);
    out.push(b'0');
    out.extend_from_slice(&key.id.to_be_bytes());
    if v2 {
        out.extend_from_slice(key.name.as_bytes());
        out.resize(HEADER_LEN + name_len, 0);
    }
    out
}

/// One item: type, big-endian length of the text with its closing zero, the text, a zero.
fn push_item(data: &mut Vec<u8>, kind: u8, text: &[u8]) {
    data.push(kind);
    data.extend_from_slice(&((text.len() + 1) as u16).to_be_bytes());
    data.extend_from_slice(text);
    data.push(0);
}

/// Our address as XRootD writes the server's view of it: `[::ffff:a.b.c.d]:port` for IPv4,
/// `[v6]:port` for IPv6 (XrdNetAddrInfo::fmtAdv6; the server also accepts `[::a.b.c.d]`).
pub fn address_as_server_sees_it(local: SocketAddr) -> String {
    match local {
        SocketAddr::V4(a) => format!("[::ffff:{}]:{}", a.ip(), a.port()),
        SocketAddr::V6(a) => match a.ip().to_ipv4_mapped() {
            Some(v4) => format!("[::ffff:{v4}]:{}", a.port()),
            None => format!("[{}]:{}", a.ip(), a.port()),
        },
    }
}

/// bf32 (XrdCryptoLite_bf32): the data and its CRC-32 (zlib's, big-endian) encrypted with
/// Blowfish in 64-bit CFB mode, zero IV. Keys of 4 to 72 bytes are used as OpenSSL's
/// `BF_set_key` uses them (longer ones cut to 72; shorter ones repeated, as Blowfish does).
pub fn bf32_encrypt(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 4);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32fast::hash(data).to_be_bytes());
    cfb_mode::Encryptor::<Blowfish>::inner_iv_init(blowfish_with(key), &[0u8; 8].into())
        .encrypt(&mut out);
    out
}

/// The data bf32 encrypted, if its CRC-32 matches (what the server does on its side).
#[cfg(test)]
fn bf32_decrypt(key: &[u8], encrypted: &[u8]) -> Option<Vec<u8>> {
    let mut out = encrypted.to_vec();
    cfb_mode::Decryptor::<Blowfish>::inner_iv_init(blowfish_with(key), &[0u8; 8].into())
        .decrypt(&mut out);
    let at = out.len().checked_sub(4)?;
    let crc = u32::from_be_bytes(out[at..].try_into().ok()?);
    out.truncate(at);
    (crc32fast::hash(&out) == crc).then_some(out)
}

fn blowfish_with(key: &[u8]) -> Blowfish {
    let mut cipher = Blowfish::bc_init_state();
    cipher.bc_expand_key(&key[..key.len().min(72)]);
    cipher
}

fn random(buf: &mut [u8]) {
    // The random bytes only vary the plaintext; were the system's source to fail, the credential
    // would still be valid (the server checks the key, time and address).
    let _ = getrandom::getrandom(buf);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::xrootd::keytab;

    #[test]
    fn crc_is_the_one_xrootd_tabulates() {
        // XrdOucCRC::CRC32: reflected 0x04C11DB7, initial value and final xor 0xffffffff, whose
        // table starts 0x00000000, 0x77073096, 0xEE0E612C: zlib's CRC-32 ("check" 0xCBF43926).
        assert_eq!(crc32fast::hash(b"123456789"), 0xcbf4_3926);
        assert_eq!(crc32fast::hash(b""), 0);
    }

    #[test]
    fn bf32_matches_openssl_blowfish_cfb64() {
        // `openssl enc -bf-cfb -K 00112233445566778899aabbccddeeff -iv 0000000000000000` of the
        // text and its CRC-32 (0xdb701d19, big-endian): 33 bytes, the last block partial.
        let key: Vec<u8> = (0..16).map(|i| i * 0x11).collect();
        let text = b"cherenkov reads ROOT files, s";
        let expected = "55bc87224e6e5d5ff140666299fb74fcfe5b3ba35a37051b35a8b5782d7075bbad";
        let encrypted = bf32_encrypt(&key, text);
        let hex: String = encrypted.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, expected);
        assert_eq!(bf32_decrypt(&key, &encrypted).as_deref(), Some(&text[..]));
        let mut damaged = encrypted.clone();
        damaged[3] ^= 1;
        assert_eq!(bf32_decrypt(&key, &damaged), None);
        // A 64-byte key (xrdsssadmin -l 64) is used whole, as OpenSSL does (up to 72 bytes).
        let long: Vec<u8> = (0..64).collect();
        assert_ne!(bf32_encrypt(&long, text), bf32_encrypt(&long[..56], text));
        assert_eq!(
            bf32_decrypt(&long, &bf32_encrypt(&long, text)).as_deref(),
            Some(&text[..])
        );
    }

    #[test]
    fn the_credential_carries_key_number_name_and_a_dated_identity() {
        let keys =
            keytab::parse("0 u:anybody n:test N:258 k:00112233445566778899aabbccddeeff").unwrap();
        let keytab = Keytab {
            path: "/k".into(),
            key: keys[0].clone(),
        };
        let local: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let now = 1_800_000_000;
        let cred = credential(&keytab, true, local, now);
        assert_eq!(&cred[..8], b"sss\0\0\0\x08\x30");
        assert_eq!(i64::from_be_bytes(cred[8..16].try_into().unwrap()), 258);
        assert_eq!(&cred[16..24], b"test\0\0\0\0");
        let data = bf32_decrypt(&keytab.key.bytes(), &cred[24..]).unwrap();
        assert!(data.len() >= MIN_DATA_LEN, "{}", data.len());
        let made = i32::from_be_bytes(data[32..36].try_into().unwrap());
        assert_eq!(i64::from(made), now - BASE_TIME);
        assert_eq!(&data[36..40], &[0, 0, 0, 0]);
        let host = b"[::ffff:127.0.0.1]:40000\0";
        assert_eq!(data[40], ITEM_HOST);
        assert_eq!(
            u16::from_be_bytes([data[41], data[42]]) as usize,
            host.len()
        );
        assert_eq!(&data[43..43 + host.len()], host);
        // Version 1 servers get no key name.
        let v1 = credential(&keytab, false, local, now);
        assert_eq!(v1[6], 0);
        assert!(bf32_decrypt(&keytab.key.bytes(), &v1[16..]).is_some());
    }

    #[test]
    fn login_parameters_are_read() {
        let p = parameters("&P=gsi,v:1&P=sss,0.+13:/etc/k&P=unix")
            .unwrap()
            .unwrap();
        assert_eq!(
            p,
            SssParameters {
                v2: true,
                keytab_hint: Some("/etc/k".into())
            }
        );
        let p = parameters("&P=sss,0.13:").unwrap().unwrap();
        assert!(!p.v2 && p.keytab_hint.is_none());
        assert_eq!(parameters("&P=unix").unwrap(), None);
        assert!(parameters("&P=sss,9.+13:").unwrap_err().contains("bf32"));
        let v6: SocketAddr = "[2001:db8::1]:5".parse().unwrap();
        assert_eq!(address_as_server_sees_it(v6), "[2001:db8::1]:5");
    }
}
