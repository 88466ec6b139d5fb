//! The StreamerInfo record: a TList of TStreamerInfo, each a TObjArray of its elements, written
//! as `format::streamers` parses it (and as ROOT 6.40 streams it).

use super::buffer::Buffer;
use crate::format::streamers::{ElementTail, StreamerElement, StreamerInfo};

/// The StreamerInfo key's class, name and title, as ROOT names them.
pub const STREAMER_INFO_CLASS: &str = "TList";
pub const STREAMER_INFO_NAME: &str = "StreamerInfo";
pub const STREAMER_INFO_TITLE: &str = "Doubly linked list";

const TLIST_VERSION: i16 = 5;
const TOBJARRAY_VERSION: i16 = 3;
/// ROOT 6.40 writes version 10 with the same members; 9 is what every ROOT 6 reads.
const TSTREAMERINFO_VERSION: i16 = 9;
const TSTREAMERELEMENT_VERSION: i16 = 4;
/// fBits of a TStreamerInfo as ROOT writes it (bit 16 set).
const INFO_BITS: u32 = 0x0001_0000;

/// The record's object (after its key header of `key_len` bytes).
pub fn write_streamer_infos(infos: &[StreamerInfo], key_len: u32) -> Vec<u8> {
    let mut b = Buffer::new(key_len);
    let list = b.begin(TLIST_VERSION);
    b.tobject(0);
    b.string("");
    b.i32(infos.len() as i32);
    for info in infos {
        b.object("TStreamerInfo", |b| write_info(b, info));
        b.u8(0); // the element's option string
    }
    b.end(list);
    b.into_bytes()
}

fn write_info(b: &mut Buffer, info: &StreamerInfo) {
    let m = b.begin(TSTREAMERINFO_VERSION);
    b.tnamed(&info.class_name, "", INFO_BITS);
    b.u32(info.checksum);
    b.i32(info.class_version);
    b.object("TObjArray", |b| {
        let array = b.begin(TOBJARRAY_VERSION);
        b.tobject(0);
        b.string("");
        b.i32(info.elements.len() as i32);
        b.i32(0); // fLowerBound
        for e in &info.elements {
            b.object(&e.class, |b| write_element(b, e));
        }
        b.end(array);
    });
    b.end(m);
}

/// Class versions of the element classes (TStreamerSTLstring wraps a TStreamerSTL).
fn element_class_version(class: &str) -> i16 {
    match class {
        "TStreamerBase" | "TStreamerSTL" => 3,
        _ => 2,
    }
}

fn write_element(b: &mut Buffer, e: &StreamerElement) {
    let outer = b.begin(element_class_version(&e.class));
    let stl = (e.class == "TStreamerSTLstring").then(|| b.begin(3));
    let base = b.begin(TSTREAMERELEMENT_VERSION);
    b.tnamed(&e.name, &e.title, 0);
    b.i32(e.type_code);
    b.i32(e.size);
    b.i32(e.array_length);
    b.i32(e.array_dims.len() as i32);
    for v in e.max_index {
        b.i32(v);
    }
    b.string(&e.type_name);
    b.end(base);
    match &e.tail {
        ElementTail::None => {}
        ElementTail::Base { version } => b.i32(*version),
        ElementTail::Counted {
            count_version,
            count_name,
            count_class,
        } => {
            b.i32(*count_version);
            b.string(count_name);
            b.string(count_class);
        }
        ElementTail::Stl {
            stl_type,
            content_type,
        } => {
            b.i32(*stl_type);
            b.i32(*content_type);
        }
    }
    if let Some(stl) = stl {
        b.end(stl);
    }
    b.end(outer);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::streamers::parse_streamer_infos;
    use crate::format::writing::classes::class;

    #[test]
    fn the_class_table_round_trips_through_the_parser() {
        let infos: Vec<StreamerInfo> = ["TTree", "TBranchElement", "TRefTable", "TLeafO", "TList"]
            .iter()
            .map(|n| class(n).unwrap().info())
            .collect();
        let key_len = 64;
        let raw = write_streamer_infos(&infos, key_len);
        assert_eq!(
            parse_streamer_infos(&raw, key_len as usize, "t").unwrap(),
            infos
        );
    }

    #[test]
    fn elements_with_arrays_and_stl_strings_round_trip() {
        let mut info = class("TNamed").unwrap().info();
        let mut array = info.elements[1].clone();
        array.name = "fValues".into();
        array.class = "TStreamerBasicType".into();
        array.type_code = 25; // kOffsetL + kFloat
        array.array_length = 6;
        array.array_dims = vec![2, 3];
        array.max_index = [2, 3, 0, 0, 0];
        let mut text = info.elements[1].clone();
        text.class = "TStreamerSTLstring".into();
        text.type_code = 365;
        text.tail = ElementTail::Stl {
            stl_type: 365,
            content_type: 61,
        };
        info.elements.extend([array, text]);
        let raw = write_streamer_infos(std::slice::from_ref(&info), 0);
        assert_eq!(parse_streamer_infos(&raw, 0, "t").unwrap(), vec![info]);
    }
}
