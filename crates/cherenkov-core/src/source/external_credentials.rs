//! The credentials of the security protocols cherenkov leaves to XrdCl (see
//! `xrootd::external`): `gsi`'s grid proxy (an X.509 proxy certificate, RFC 3820, looked for where
//! grid clients look: `$XrdSecGSIUSERPROXY`, `$X509_USER_PROXY`, `/tmp/x509up_u<uid>`) and
//! `krb5`'s tickets (`$KRB5CCNAME`). Looked at only to say why a server refused us, which XrdCl's
//! "Auth failed: No protocols left to try" does not tell.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::path::{Path, PathBuf};

/// What is wrong with the credentials of the protocols `offered`, as far as can be seen here.
pub fn problem(offered: &[String]) -> Option<String> {
    let offers = |p: &str| offered.iter().any(|o| o == p);
    let problems: Vec<String> = [
        offers("gsi").then(grid_proxy_problem).flatten(),
        offers("krb5").then(kerberos_problem).flatten(),
    ]
    .into_iter()
    .flatten()
    .collect();
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// No Kerberos tickets where `$KRB5CCNAME` names a file (other kinds of cache are not looked
/// into, nor the default one, which krb5.conf may place anywhere).
fn kerberos_problem() -> Option<String> {
    let name = std::env::var("KRB5CCNAME").ok()?;
    let path = match name.split_once(':') {
        Some(("FILE", path)) => path,
        Some(_) => return None,
        None => &name,
    };
    (!Path::new(path).exists())
        .then(|| format!("no Kerberos tickets in {path} (KRB5CCNAME; get them with kinit)"))
}

/// What is wrong with the grid proxy: missing, unreadable or expired; `None` when it looks fine.
fn grid_proxy_problem() -> Option<String> {
    let (path, origin) = location();
    let shown = path.display();
    let Ok(pem) = std::fs::read(&path) else {
        return Some(if path.exists() {
            format!("the grid proxy {shown} ({origin}) cannot be read")
        } else {
            format!("no grid proxy at {shown} ({origin})")
        });
    };
    let Some(Ok(first)) = CertificateDer::pem_slice_iter(&pem).next() else {
        return Some(format!("{shown} ({origin}) holds no certificate"));
    };
    let (ends, shown_end) = not_after(&first)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    (ends <= now).then(|| format!("the grid proxy {shown} ({origin}) expired on {shown_end}"))
}

/// Where the proxy is, and what said so.
fn location() -> (PathBuf, String) {
    for variable in ["XrdSecGSIUSERPROXY", "X509_USER_PROXY"] {
        if let Some(path) = std::env::var_os(variable).filter(|p| !p.is_empty()) {
            return (PathBuf::from(path), variable.to_string());
        }
    }
    let default = format!("/tmp/x509up_u{}", super::credentials::user_id());
    (
        PathBuf::from(default),
        "where X509_USER_PROXY is unset".to_string(),
    )
}

/// One DER element: its tag, its contents and what follows it.
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |a, &b| a << 8 | b as usize);
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The certificate's `notAfter` (RFC 5280 4.1.2.5), in seconds since 1970 and as text.
fn not_after(der: &[u8]) -> Option<(i64, String)> {
    let (_, certificate, _) = element(der)?;
    let (_, tbs, _) = element(certificate)?;
    let (tag, _, rest) = element(tbs)?;
    let rest = if tag == 0xa0 { element(rest)?.2 } else { rest }; // version, then serial
    let rest = element(rest)?.2; // signature algorithm
    let rest = element(rest)?.2; // issuer
    let (_, validity, _) = element(rest)?;
    let (_, _, after) = element(validity)?; // notBefore
    let (tag, time, _) = element(after)?;
    let text = std::str::from_utf8(time).ok()?.strip_suffix('Z')?;
    let digits = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let (year, rest) = match (tag, text.len()) {
        (0x17, 12) => (
            digits(0..2).map(|y| if y >= 50 { 1900 + y } else { 2000 + y })?,
            2,
        ),
        (0x18, 14) => (digits(0..4)?, 4),
        _ => return None,
    };
    let field = |i: usize| digits(rest + 2 * i..rest + 2 * i + 2);
    let (month, day, hour, minute, second) =
        (field(0)?, field(1)?, field(2)?, field(3)?, field(4)?);
    let seconds = days_since_epoch(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
    let shown = format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02} UTC");
    Some((seconds, shown))
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar.
fn days_since_epoch(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_count_from_1970() {
        assert_eq!(days_since_epoch(1970, 1, 1), 0);
        assert_eq!(days_since_epoch(2000, 3, 1), 11_017);
        assert_eq!(days_since_epoch(2020, 1, 2), 18_263);
    }

    #[test]
    fn validity_is_read_from_the_certificate() {
        // TBSCertificate with a version, serial 1, an empty algorithm and issuer, and a validity
        // of UTCTime 200101000000Z .. 200102000000Z.
        let time = |s: &[u8]| [&[0x17, s.len() as u8][..], s].concat();
        let validity = [time(b"200101000000Z"), time(b"200102000000Z")].concat();
        let validity = [&[0x30, validity.len() as u8][..], &validity].concat();
        let tbs = [
            &[0xa0, 3, 2, 1, 2][..],
            &[2, 1, 1],
            &[0x30, 0],
            &[0x30, 0],
            &validity,
        ]
        .concat();
        let tbs = [&[0x30, tbs.len() as u8][..], &tbs].concat();
        let certificate = [&[0x30, tbs.len() as u8][..], &tbs].concat();
        let (seconds, shown) = not_after(&certificate).unwrap();
        assert_eq!(seconds, 18_263 * 86400);
        assert_eq!(shown, "2020-01-02 00:00:00 UTC");
        assert_eq!(not_after(&certificate[..20]), None);
    }
}
