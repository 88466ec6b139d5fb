//! The streamer-info list (TList of TStreamerInfo): how each class in the file is laid out.
//! cherenkov uses it to learn the declared type of split class members (e.g. `std::string`,
//! `vector<float>`), and shows it in summaries.

use super::cursor::Cursor;
use super::objects::{
    read_list, read_obj_array, read_tnamed, read_version, Pointer, PointerReader,
};
use crate::error::Result;

#[derive(Clone, Debug, PartialEq)]
pub struct StreamerElement {
    /// TStreamerBasicType, TStreamerSTL, TStreamerString, ...
    pub class: String,
    pub name: String,
    pub type_code: i32,
    pub type_name: String,
    pub title: String,
    /// Bytes of the member in memory (fSize) and of its fixed array (fArrayLength).
    pub size: i32,
    pub array_length: i32,
    /// Fixed array dimensions (fMaxIndex up to fArrayDim); empty for scalars.
    pub array_dims: Vec<usize>,
    /// fMaxIndex as stored: a base class keeps its checksum in the second slot.
    pub max_index: [i32; 5],
    /// What the element's class adds after the TStreamerElement part.
    pub tail: ElementTail,
}

/// The members a TStreamerElement subclass streams after its base.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum ElementTail {
    #[default]
    None,
    /// TStreamerBase: the base class's version.
    Base { version: i32 },
    /// TStreamerBasicPointer and TStreamerLoop: the member counting the array.
    Counted {
        count_version: i32,
        count_name: String,
        count_class: String,
    },
    /// TStreamerSTL (and TStreamerSTLstring): the container kind and its content's type.
    Stl { stl_type: i32, content_type: i32 },
}

#[derive(Clone, Debug, PartialEq)]
pub struct StreamerInfo {
    pub class_name: String,
    pub class_version: i32,
    pub checksum: u32,
    pub elements: Vec<StreamerElement>,
}

#[derive(Clone, Debug, PartialEq)]
enum Item {
    Info(usize),
    Elements(usize),
    Element(StreamerElement),
    Other,
}

#[derive(Default)]
struct Parser {
    infos: Vec<StreamerInfo>,
    element_lists: Vec<Vec<StreamerElement>>,
}

/// Parse the streamer-info list (the uncompressed object of the file's "StreamerInfo" key).
pub fn parse_streamer_infos(
    data: &[u8],
    key_len: usize,
    origin: &str,
) -> Result<Vec<StreamerInfo>> {
    let mut cur = Cursor::new(data, origin, 0);
    let mut ptrs = PointerReader::new(key_len);
    let mut p = Parser::default();
    let items = read_list(&mut cur, &mut ptrs, &mut |ptrs, cur, class, end| {
        p.read_body(ptrs, cur, class, end)
    })?;
    let indices: Vec<usize> = items
        .iter()
        .filter_map(|i| {
            if let Item::Info(k) = i {
                Some(*k)
            } else {
                None
            }
        })
        .collect();
    Ok(indices.into_iter().map(|k| p.infos[k].clone()).collect())
}

impl Parser {
    fn read_body(
        &mut self,
        ptrs: &mut PointerReader<Item>,
        cur: &mut Cursor,
        class: &str,
        end: Option<usize>,
    ) -> Result<Item> {
        match class {
            "TStreamerInfo" => {
                let v = read_version(cur, class)?;
                let (class_name, _) = read_tnamed(cur)?;
                let checksum = cur.u32("TStreamerInfo fCheckSum")?;
                let class_version = cur.i32("TStreamerInfo fClassVersion")?;
                let elements = match ptrs.read(cur, &mut |ptrs, cur, class, end| {
                    self.read_body(ptrs, cur, class, end)
                })? {
                    Pointer::Object(Item::Elements(k)) => {
                        std::mem::take(&mut self.element_lists[k])
                    }
                    _ => Vec::new(),
                };
                if let Some(end) = v.end {
                    cur.seek(end)?;
                }
                self.infos.push(StreamerInfo {
                    class_name,
                    class_version,
                    checksum,
                    elements,
                });
                Ok(Item::Info(self.infos.len() - 1))
            }
            "TObjArray" => {
                let items = read_obj_array(cur, ptrs, &mut |ptrs, cur, class, end| {
                    self.read_body(ptrs, cur, class, end)
                })?;
                let elements = items
                    .into_iter()
                    .filter_map(|i| {
                        if let Item::Element(e) = i {
                            Some(e)
                        } else {
                            None
                        }
                    })
                    .collect();
                self.element_lists.push(elements);
                Ok(Item::Elements(self.element_lists.len() - 1))
            }
            c if c.starts_with("TStreamer") => {
                let outer = read_version(cur, class)?;
                // TStreamerSTLstring is a TStreamerSTL, one level more.
                let stl = if class == "TStreamerSTLstring" {
                    read_version(cur, "TStreamerSTL")?
                } else {
                    outer
                };
                let base = read_version(cur, "TStreamerElement")?;
                let (name, title) = read_tnamed(cur)?;
                let type_code = cur.i32("TStreamerElement fType")?;
                let size = cur.i32("TStreamerElement fSize")?;
                let array_length = cur.i32("TStreamerElement fArrayLength")?;
                let dims_at = cur.pos();
                let ndims = cur.i32("TStreamerElement fArrayDim")?;
                let max_index = if base.version == 1 {
                    let n = cur.count("TStreamerElement fMaxIndex length", 4)?;
                    cur.i32_array(n, "TStreamerElement fMaxIndex")?
                } else {
                    cur.i32_array(5, "TStreamerElement fMaxIndex")?
                };
                // Slots past fArrayDim are not dimensions (TStreamerBase keeps other values there).
                let dims = usize::try_from(ndims).ok().and_then(|n| max_index.get(..n));
                let array_dims = match dims {
                    Some(d) if d.iter().all(|&x| x >= 0) => d.iter().map(|&x| x as usize).collect(),
                    _ => {
                        return Err(cur.error_at(
                            dims_at,
                            format!("{class} '{name}' with 0 to 5 non-negative array dimensions, found {max_index:?} of {ndims}"),
                        ))
                    }
                };
                let mut stored_index = [0i32; 5];
                for (slot, v) in stored_index.iter_mut().zip(&max_index) {
                    *slot = *v;
                }
                let type_name = cur.string("TStreamerElement fTypeName")?;
                base.skip_to_end(cur, "TStreamerElement")?;
                let tail = read_tail(cur, class, outer.version)?;
                if class.starts_with("TStreamerSTL") {
                    stl.skip_to_end(cur, "TStreamerSTL")?;
                }
                outer.skip_to_end(cur, class)?;
                Ok(Item::Element(StreamerElement {
                    class: class.to_string(),
                    name,
                    type_code,
                    type_name,
                    title,
                    size,
                    array_length,
                    array_dims,
                    max_index: stored_index,
                    tail,
                }))
            }
            _ => match end {
                Some(end) => {
                    cur.seek(end)?;
                    Ok(Item::Other)
                }
                None => Err(cur.error(format!("a byte count to skip an object of class {class}"))),
            },
        }
    }
}

/// The members a TStreamerElement subclass adds, read where its version has them (TStreamerBase
/// before version 3 kept no base version).
fn read_tail(cur: &mut Cursor, class: &str, version: i16) -> Result<ElementTail> {
    Ok(match class {
        "TStreamerBase" if version > 2 => ElementTail::Base {
            version: cur.i32("TStreamerBase fBaseVersion")?,
        },
        "TStreamerBasicPointer" | "TStreamerLoop" => ElementTail::Counted {
            count_version: cur.i32(&format!("{class} fCountVersion"))?,
            count_name: cur.string(&format!("{class} fCountName"))?,
            count_class: cur.string(&format!("{class} fCountClass"))?,
        },
        c if c.starts_with("TStreamerSTL") => ElementTail::Stl {
            stl_type: cur.i32("TStreamerSTL fSTLtype")?,
            content_type: cur.i32("TStreamerSTL fCtype")?,
        },
        _ => ElementTail::None,
    })
}

/// The element a TBranchElement stands for: member `id` of `class_name` (matching the version
/// when the file has several).
pub fn find_element<'a>(
    infos: &'a [StreamerInfo],
    class_name: &str,
    version: i32,
    id: i32,
) -> Option<&'a StreamerElement> {
    let mut candidates = infos.iter().filter(|i| i.class_name == class_name);
    let info = candidates
        .clone()
        .find(|i| i.class_version == version)
        .or_else(|| candidates.next())?;
    info.elements.get(usize::try_from(id).ok()?)
}
