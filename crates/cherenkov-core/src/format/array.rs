//! Arrays as readers hand them out, in awkward's layout vocabulary (numpy, list-offset, regular,
//! record, options, union), so that TTree branches and RNTuple fields of any type come out in one
//! shape and the bindings turn them into awkward or numpy arrays without copying the data.
//! Numbers are native-endian; offsets and indices are `i64`, as in uproot's forms.

use std::mem::MaybeUninit;
use std::sync::Arc;

/// Element types of numeric data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    F32,
    F64,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::Bool | DType::I8 | DType::U8 => 1,
            DType::I16 | DType::U16 | DType::F16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }

    /// The numpy name.
    pub fn name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U16 => "uint16",
            DType::U32 => "uint32",
            DType::U64 => "uint64",
            DType::F16 => "float16",
            DType::F32 => "float32",
            DType::F64 => "float64",
        }
    }

    /// The C++ name, for listings.
    pub fn cpp_name(self) -> &'static str {
        match self {
            DType::Bool => "bool",
            DType::I8 => "int8_t",
            DType::I16 => "int16_t",
            DType::I32 => "int32_t",
            DType::I64 => "int64_t",
            DType::U8 => "uint8_t",
            DType::U16 => "uint16_t",
            DType::U32 => "uint32_t",
            DType::U64 => "uint64_t",
            DType::F16 => "half",
            DType::F32 => "float",
            DType::F64 => "double",
        }
    }
}

/// Bytes in 8-byte words, so numpy can view them as any element type without copying; or bytes
/// another owner keeps alive (a numpy array handed to a writer), read where they are.
#[derive(Clone, Default)]
pub struct AlignedBytes {
    pub len: usize,
    storage: Storage,
}

#[derive(Clone)]
enum Storage {
    Words(Vec<u64>),
    Shared(std::sync::Arc<dyn SharedBytes>),
}

impl Default for Storage {
    fn default() -> Self {
        Storage::Words(Vec::new())
    }
}

/// Memory an array may borrow instead of copying: its owner keeps it alive and unchanged for as
/// long as the array holds it.
pub trait SharedBytes: Send + Sync {
    fn bytes(&self) -> &[u8];
    /// The 8-byte words holding the bytes, when the owner holds them so (a read's output kept
    /// for reuse: `engine::recycle`): numpy views them as `into_words` would hand them out.
    fn words(&self) -> Option<&[u64]> {
        None
    }
}

impl AlignedBytes {
    pub fn zeroed(len: usize) -> Self {
        Self {
            len,
            storage: Storage::Words(vec![0u64; len.div_ceil(8)]),
        }
    }
    pub fn from_slice(bytes: &[u8]) -> Self {
        let mut out = Self::zeroed(bytes.len());
        out.as_bytes_mut().copy_from_slice(bytes);
        out
    }
    /// The first `len` bytes of `words`.
    pub fn from_words(words: Vec<u64>, len: usize) -> Self {
        assert!(
            len <= words.len() * 8,
            "{len} bytes in {} words",
            words.len()
        );
        Self {
            len,
            storage: Storage::Words(words),
        }
    }
    /// The owner of shared bytes that holds them as words, when no other array holds them:
    /// a view of them can then be written without the change showing elsewhere.
    pub fn into_sole_owner(self) -> std::result::Result<std::sync::Arc<dyn SharedBytes>, Self> {
        match self.storage {
            Storage::Shared(owner)
                if owner.words().is_some()
                    && std::sync::Arc::strong_count(&owner) == 1
                    && std::sync::Arc::weak_count(&owner) == 0 =>
            {
                Ok(owner)
            }
            storage => Err(Self {
                len: self.len,
                storage,
            }),
        }
    }
    /// Bytes kept by `owner`, not copied.
    pub fn shared(owner: std::sync::Arc<dyn SharedBytes>) -> Self {
        Self {
            len: owner.bytes().len(),
            storage: Storage::Shared(owner),
        }
    }
    pub fn as_bytes(&self) -> &[u8] {
        match &self.storage {
            // SAFETY: u64 storage viewed as bytes; `len` never exceeds the storage.
            Storage::Words(w) => unsafe {
                std::slice::from_raw_parts(w.as_ptr() as *const u8, self.len)
            },
            Storage::Shared(s) => &s.bytes()[..self.len],
        }
    }
    /// The bytes to change (shared ones are copied first).
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        if let Storage::Shared(s) = &self.storage {
            let mut words = vec![0u64; self.len.div_ceil(8)];
            // SAFETY: as below, on a fresh buffer of at least `len` bytes.
            unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, self.len) }
                .copy_from_slice(&s.bytes()[..self.len]);
            self.storage = Storage::Words(words);
        }
        let Storage::Words(w) = &mut self.storage else {
            unreachable!("made words above")
        };
        // SAFETY: as above, exclusive borrow.
        unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr() as *mut u8, self.len) }
    }
    /// The 8-byte words holding the bytes (shared ones are copied).
    pub fn into_words(mut self) -> Vec<u64> {
        self.as_bytes_mut();
        match self.storage {
            Storage::Words(w) => w,
            Storage::Shared(_) => unreachable!("made words by as_bytes_mut"),
        }
    }
}

impl PartialEq for AlignedBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl std::fmt::Debug for AlignedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBytes")
            .field("len", &self.len)
            .field("shared", &matches!(self.storage, Storage::Shared(_)))
            .finish()
    }
}

/// Outputs of this many bytes and more are written with non-temporal stores, which bypass the
/// cache: a read's output is cold (tens of MB), and a store through the cache reads each line
/// before writing it (TTree numbers byte-swapped, RNTuple pages un-split).
pub const STREAMED_OUTPUT_BYTES: usize = 16 << 10;

/// A buffer whose every element a reader writes before it is read: allocated without zeroing,
/// since zeroing is a pass over memory the reader overwrites anyway (and a serial one, before
/// the parallel writers start).
pub struct Unwritten<T> {
    items: Vec<MaybeUninit<T>>,
}

impl<T: Copy> Unwritten<T> {
    pub fn new(n: usize) -> Self {
        Self::in_buffer(Vec::new(), n)
    }

    /// `n` elements in `buffer`'s memory (grown if it holds fewer), whatever it held.
    pub fn in_buffer(mut items: Vec<MaybeUninit<T>>, n: usize) -> Self {
        items.clear();
        items.reserve_exact(n);
        // SAFETY: `MaybeUninit` elements need no initialization.
        unsafe { items.set_len(n) };
        Self { items }
    }

    pub fn slots(&mut self) -> &mut [MaybeUninit<T>] {
        &mut self.items
    }

    /// The written elements.
    ///
    /// # Safety
    /// Every slot was written.
    pub unsafe fn assume_written(self) -> Vec<T> {
        let mut items = std::mem::ManuallyDrop::new(self.items);
        // SAFETY: same allocation, length and capacity; `MaybeUninit<T>` has `T`'s layout and
        // every element was written (the caller's promise).
        unsafe { Vec::from_raw_parts(items.as_mut_ptr() as *mut T, items.len(), items.capacity()) }
    }
}

/// awkward parameters that readers set: `__array__` ("string", "char", "set", "sorted_map"),
/// `__record__` (a class name). Values are plain strings.
pub type Parameters = Vec<(String, String)>;

/// The integer type awkward gives a node's offsets or index (its `Index32` or `Index64`); the
/// values are held as `i64` either way. uproot's RNTuple forms follow the index column's width.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IndexType {
    I32,
    #[default]
    I64,
}

impl IndexType {
    /// awkward's name in forms ("i32", "i64").
    pub fn name(self) -> &'static str {
        match self {
            IndexType::I32 => "i32",
            IndexType::I64 => "i64",
        }
    }
}

/// One array node. Lengths are in entries of that node.
#[derive(Clone, Debug, PartialEq)]
pub enum Layout {
    /// No data and no type (awkward's `EmptyArray`; uproot's `?unknown` union member).
    Empty,
    /// `data` holds `length * product(inner_shape)` items of `dtype`.
    Numpy {
        dtype: DType,
        inner_shape: Vec<usize>,
        data: AlignedBytes,
    },
    /// Entry `i` is `content[offsets[i]..offsets[i + 1]]`; `offsets` has length + 1 values,
    /// shared by lists of the same collection (an RNTuple's fields of one collection).
    ListOffset {
        offsets: Arc<Vec<i64>>,
        content: Box<Array>,
        index_type: IndexType,
    },
    /// Every entry holds `size` items of `content`.
    Regular {
        size: usize,
        length: usize,
        content: Box<Array>,
    },
    /// Fields side by side; `names` is `None` for a tuple.
    Record {
        names: Option<Vec<String>>,
        contents: Vec<Array>,
        length: usize,
    },
    /// Entry `i` is missing when `index[i] < 0`, else `content[index[i]]`.
    IndexedOption {
        index: Vec<i64>,
        content: Box<Array>,
        index_type: IndexType,
    },
    /// An option type none of whose entries is missing (awkward's `UnmaskedArray`; uproot's
    /// variant alternatives).
    Unmasked { content: Box<Array> },
    /// Entry `i` is `contents[tags[i]][index[i]]`.
    Union {
        tags: Vec<i8>,
        index: Vec<i64>,
        contents: Vec<Array>,
    },
}

/// A layout with its awkward parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    pub layout: Layout,
    pub parameters: Parameters,
}

impl From<Layout> for Array {
    fn from(layout: Layout) -> Self {
        Array {
            layout,
            parameters: Vec::new(),
        }
    }
}

impl Array {
    pub fn numpy(dtype: DType, inner_shape: Vec<usize>, data: AlignedBytes) -> Self {
        Layout::Numpy {
            dtype,
            inner_shape,
            data,
        }
        .into()
    }

    pub fn list(offsets: Vec<i64>, content: Array) -> Self {
        Array::list_shared(Arc::new(offsets), content)
    }

    /// A list whose offsets other lists may hold too.
    pub fn list_shared(offsets: Arc<Vec<i64>>, content: Array) -> Self {
        Layout::ListOffset {
            offsets,
            content: Box::new(content),
            index_type: IndexType::I64,
        }
        .into()
    }

    pub fn option(index: Vec<i64>, content: Array) -> Self {
        Layout::IndexedOption {
            index,
            content: Box::new(content),
            index_type: IndexType::I64,
        }
        .into()
    }

    /// The same node with offsets or index of another integer type (no other node has one).
    pub fn with_index_type(mut self, t: IndexType) -> Self {
        if let Layout::ListOffset { index_type, .. } | Layout::IndexedOption { index_type, .. } =
            &mut self.layout
        {
            *index_type = t;
        }
        self
    }

    /// Strings as awkward has them: a list of `char` bytes marked `string`.
    pub fn strings(offsets: Vec<i64>, bytes: AlignedBytes) -> Self {
        let chars = Array::numpy(DType::U8, vec![], bytes).with_parameter("__array__", "char");
        Array::list(offsets, chars).with_parameter("__array__", "string")
    }

    pub fn regular(size: usize, length: usize, content: Array) -> Self {
        Layout::Regular {
            size,
            length,
            content: Box::new(content),
        }
        .into()
    }

    pub fn record(names: Vec<String>, contents: Vec<Array>, length: usize) -> Self {
        Layout::Record {
            names: Some(names),
            contents,
            length,
        }
        .into()
    }

    pub fn tuple(contents: Vec<Array>, length: usize) -> Self {
        Layout::Record {
            names: None,
            contents,
            length,
        }
        .into()
    }

    pub fn with_parameter(mut self, key: &str, value: &str) -> Self {
        self.parameters.retain(|(k, _)| k != key);
        self.parameters.push((key.to_string(), value.to_string()));
        self
    }

    pub fn parameter(&self, key: &str) -> Option<&str> {
        self.parameters
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Entries of this node.
    pub fn len(&self) -> usize {
        match &self.layout {
            Layout::Empty => 0,
            Layout::Numpy {
                dtype,
                inner_shape,
                data,
            } => {
                let item = dtype.size() * inner_shape.iter().product::<usize>();
                data.len.checked_div(item).unwrap_or(0)
            }
            Layout::ListOffset { offsets, .. } => offsets.len().saturating_sub(1),
            Layout::Regular { length, .. } | Layout::Record { length, .. } => *length,
            Layout::IndexedOption { index, .. } => index.len(),
            Layout::Unmasked { content } => content.len(),
            Layout::Union { tags, .. } => tags.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes held by the array's buffers (data, offsets, indices, tags), nested ones included.
    pub fn nbytes(&self) -> usize {
        let i64s = |v: &Vec<i64>| v.len() * 8;
        match &self.layout {
            Layout::Empty => 0,
            Layout::Numpy { data, .. } => data.len,
            Layout::ListOffset {
                offsets, content, ..
            } => i64s(offsets) + content.nbytes(),
            Layout::Regular { content, .. } => content.nbytes(),
            Layout::Record { contents, .. } => contents.iter().map(Array::nbytes).sum(),
            Layout::IndexedOption { index, content, .. } => i64s(index) + content.nbytes(),
            Layout::Unmasked { content } => content.nbytes(),
            Layout::Union {
                tags,
                index,
                contents,
            } => tags.len() + i64s(index) + contents.iter().map(Array::nbytes).sum::<usize>(),
        }
    }

    /// Entries `[start, stop)` of a valid array (`start <= stop <= len`). Lists and fixed-size
    /// arrays keep only the content their entries use (offsets start at 0 again); options and
    /// unions keep their contents whole.
    pub fn slice(self, start: usize, stop: usize) -> Array {
        if start == 0 && stop == self.len() {
            return self;
        }
        let parameters = self.parameters;
        let layout = match self.layout {
            Layout::Empty => Layout::Empty,
            Layout::Numpy {
                dtype,
                inner_shape,
                data,
            } => {
                let item = dtype.size() * inner_shape.iter().product::<usize>();
                let data = AlignedBytes::from_slice(&data.as_bytes()[start * item..stop * item]);
                Layout::Numpy {
                    dtype,
                    inner_shape,
                    data,
                }
            }
            Layout::ListOffset {
                offsets,
                content,
                index_type,
            } => {
                let (lo, hi) = (offsets[start], offsets[stop]);
                Layout::ListOffset {
                    offsets: Arc::new(offsets[start..=stop].iter().map(|o| o - lo).collect()),
                    content: Box::new(content.slice(lo as usize, hi as usize)),
                    index_type,
                }
            }
            Layout::Regular { size, content, .. } => Layout::Regular {
                size,
                length: stop - start,
                content: Box::new(content.slice(start * size, stop * size)),
            },
            Layout::Record {
                names, contents, ..
            } => Layout::Record {
                names,
                contents: contents.into_iter().map(|c| c.slice(start, stop)).collect(),
                length: stop - start,
            },
            Layout::IndexedOption {
                index,
                content,
                index_type,
            } => Layout::IndexedOption {
                index: index[start..stop].to_vec(),
                content,
                index_type,
            },
            Layout::Unmasked { content } => Layout::Unmasked {
                content: Box::new(content.slice(start, stop)),
            },
            Layout::Union {
                tags,
                index,
                contents,
            } => Layout::Union {
                tags: tags[start..stop].to_vec(),
                index: index[start..stop].to_vec(),
                contents,
            },
        };
        Array { layout, parameters }
    }

    /// Whether every index, offset and tag points inside its content, so that a consumer can
    /// trust the array without checking (readers build arrays from untrusted bytes).
    pub fn is_valid(&self) -> bool {
        match &self.layout {
            Layout::Empty => true,
            Layout::Numpy {
                dtype,
                inner_shape,
                data,
            } => {
                let item = dtype.size() * inner_shape.iter().product::<usize>();
                item == 0 || data.len % item == 0
            }
            Layout::ListOffset {
                offsets, content, ..
            } => {
                !offsets.is_empty()
                    && offsets[0] >= 0
                    && offsets.windows(2).all(|w| w[0] <= w[1])
                    && *offsets.last().unwrap() as usize <= content.len()
                    && content.is_valid()
            }
            Layout::Regular {
                size,
                length,
                content,
            } => {
                size.checked_mul(*length)
                    .is_some_and(|n| n <= content.len())
                    && content.is_valid()
            }
            Layout::Record {
                names,
                contents,
                length,
            } => {
                names.as_ref().is_none_or(|n| n.len() == contents.len())
                    && contents.iter().all(|c| c.len() >= *length && c.is_valid())
            }
            Layout::IndexedOption { index, content, .. } => {
                index.iter().all(|&i| i < content.len() as i64) && content.is_valid()
            }
            Layout::Unmasked { content } => content.is_valid(),
            Layout::Union {
                tags,
                index,
                contents,
            } => {
                tags.len() == index.len()
                    && tags.iter().zip(index).all(|(&t, &i)| {
                        usize::try_from(t)
                            .ok()
                            .and_then(|t| contents.get(t))
                            .is_some_and(|c| i >= 0 && (i as usize) < c.len())
                    })
                    && contents.iter().all(Array::is_valid)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(values: &[i32]) -> Array {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        Array::numpy(DType::I32, vec![], AlignedBytes::from_slice(&bytes))
    }

    #[test]
    fn lengths_count_entries_of_each_node() {
        let list = Array::list(vec![0, 2, 2, 3], ints(&[1, 2, 3]));
        assert_eq!(list.len(), 3);
        assert_eq!(Array::regular(2, 1, ints(&[1, 2])).len(), 1);
        let strings = Array::strings(vec![0, 1], AlignedBytes::from_slice(b"a"));
        assert_eq!(strings.parameter("__array__"), Some("string"));
        assert!(list.is_valid() && strings.is_valid());
    }

    #[test]
    fn slices_keep_the_content_their_entries_use() {
        let nested = Array::list(vec![0, 2, 2, 3], ints(&[1, 2, 3]));
        let outer = Array::list(vec![0, 1, 3], nested);
        let tail = outer.clone().slice(1, 2);
        let inner = Array::list(vec![0, 0, 1], ints(&[3]));
        assert_eq!(tail, Array::list(vec![0, 2], inner));
        assert!(tail.is_valid());
        assert_eq!(outer.clone().slice(0, 2), outer);
        let regular = Array::regular(2, 3, ints(&[1, 2, 3, 4, 5, 6])).slice(2, 3);
        assert_eq!(regular, Array::regular(2, 1, ints(&[5, 6])));
    }

    #[test]
    fn offsets_and_indices_past_their_content_are_invalid() {
        assert!(!Array::list(vec![0, 4], ints(&[1, 2, 3])).is_valid());
        assert!(!Array::list(vec![2, 1], ints(&[1, 2, 3])).is_valid());
        assert!(!Array::option(vec![0, -1, 3], ints(&[1, 2, 3])).is_valid());
        let union = Layout::Union {
            tags: vec![0, 1],
            index: vec![0, 0],
            contents: vec![ints(&[1])],
        };
        assert!(!Array::from(union).is_valid());
    }
}
