//! An RNTuple's metadata as one validated whole: the header's schema with the footer's extension,
//! the field tree, each field's columns by representation, and the cluster groups. Field names,
//! paths and keys follow uproot's conventions, so that selections and forms match its own.

use super::anchor::Anchor;
use super::footer::{ClusterGroup, Footer};
use super::header::Header;
use super::schema::{FieldRecord, Role, Schema};
use crate::error::{Error, Result};

#[derive(Clone, Debug)]
pub struct Descriptor {
    pub name: String,
    pub description: String,
    pub writer: String,
    /// The format version the anchor states.
    pub version: [u16; 4],
    pub schema: Schema,
    pub header_checksum: u64,
    pub groups: Vec<ClusterGroup>,
    children: Vec<Vec<usize>>,
    top_level: Vec<usize>,
    /// Per field, its physical columns in ID order.
    columns: Vec<Vec<usize>>,
    /// Per field, the name uproot shows (see `display_name`).
    display: Vec<String>,
}

impl Descriptor {
    /// Combine header and footer; `origin` names the RNTuple in errors.
    pub fn new(anchor: &Anchor, header: Header, footer: Footer, origin: &str) -> Result<Self> {
        let mut schema = header.schema;
        schema.extend(footer.extension);
        let bad = |what: String| Error::format(origin.to_string(), what);
        let n_fields = schema.fields.len();
        let mut children = vec![Vec::new(); n_fields];
        let mut top_level = Vec::new();
        for (id, f) in schema.fields.iter().enumerate() {
            // Parents come first (the spec orders subfields after their parents): no cycles.
            if f.parent > id {
                return Err(bad(format!(
                    "field {id} ('{}') with a parent of smaller ID, found {}",
                    f.name, f.parent
                )));
            }
            if f.parent == id {
                top_level.push(id);
            } else {
                children[f.parent].push(id);
            }
            if let Some(s) = f.source {
                if s >= n_fields || schema.fields[s].source.is_some() {
                    return Err(bad(format!(
                        "projected field {id} ('{}') with an unprojected source field, found {s}",
                        f.name
                    )));
                }
            }
        }
        let mut columns = vec![Vec::new(); n_fields];
        for (id, c) in schema.columns.iter().enumerate() {
            columns
                .get_mut(c.field)
                .ok_or_else(|| {
                    bad(format!(
                        "column {id} of one of the {n_fields} fields, found field {}",
                        c.field
                    ))
                })?
                .push(id);
        }
        for a in &schema.aliases {
            if a.physical >= schema.columns.len() || a.field >= n_fields {
                return Err(bad(format!(
                    "an alias column of an existing column and field, found column {} of field {}",
                    a.physical, a.field
                )));
            }
        }
        let mut spans = footer.groups.iter().map(|g| g.entry_span);
        if spans.try_fold(0u64, |a, b| a.checked_add(b)).is_none() {
            return Err(bad("cluster groups of at most 2^64 entries in all".into()));
        }
        let mut d = Descriptor {
            name: header.name,
            description: header.description,
            writer: header.writer,
            version: anchor.version,
            schema,
            header_checksum: header.checksum,
            groups: footer.groups,
            children,
            top_level,
            columns,
            display: Vec::new(),
        };
        d.display = (0..n_fields).map(|f| d.plain_name(f).to_string()).collect();
        for r in 0..n_fields {
            if d.schema.fields[r].role == Role::Record {
                d.rename_collisions(r);
            }
        }
        Ok(d)
    }

    pub fn entries(&self) -> u64 {
        self.groups.iter().map(|g| g.entry_span).sum()
    }

    pub fn field(&self, f: usize) -> &FieldRecord {
        &self.schema.fields[f]
    }

    pub fn children(&self, f: usize) -> &[usize] {
        &self.children[f]
    }

    pub fn top_level(&self) -> &[usize] {
        &self.top_level
    }

    pub fn parent(&self, f: usize) -> Option<usize> {
        let p = self.schema.fields[f].parent;
        (p != f).then_some(p)
    }

    /// The field whose columns `f` reads: its projection source, else itself.
    pub fn source(&self, f: usize) -> usize {
        self.schema.fields[f].source.unwrap_or(f)
    }

    /// The physical columns of field `f` (not of its projection source).
    pub fn columns(&self, f: usize) -> &[usize] {
        &self.columns[f]
    }

    /// The columns of `f` at each position, one per representation: `[position][representation]`.
    pub fn column_positions(&self, f: usize) -> Vec<Vec<usize>> {
        let mut positions: Vec<Vec<usize>> = Vec::new();
        let mut seen = std::collections::HashMap::new();
        for &c in &self.columns[f] {
            let r = self.schema.columns[c].representation;
            let position = seen.entry(r).or_insert(0usize);
            if positions.len() <= *position {
                positions.push(Vec::new());
            }
            positions[*position].push(c);
            *position += 1;
        }
        positions
    }

    /// Items per entry of `f`'s columns: the product of the fixed-size array lengths on its path
    /// (how many elements a column gets per entry unless a collection intervenes).
    pub fn repetitions(&self, f: usize) -> Option<u64> {
        let mut n = 1u64;
        let mut at = Some(f);
        while let Some(id) = at {
            n = n.checked_mul(self.schema.fields[id].repetition.max(1))?;
            at = self.parent(id);
        }
        Some(n)
    }

    /// Fields uproot hides: the items of collections, variants and fixed-size arrays, the value
    /// of atomics and enums (`_0` under a leaf), and base classes (`:_0`) of records.
    pub fn is_anonymous(&self, f: usize) -> bool {
        let Some(p) = self.parent(f) else {
            return false;
        };
        let parent = &self.schema.fields[p];
        let name = &self.schema.fields[f].name;
        matches!(parent.role, Role::Collection | Role::Variant)
            || parent.repetition > 0
            || (parent.role == Role::Leaf && name == "_0")
            || (parent.role == Role::Record && is_numbered(name, ":_"))
    }

    /// Whether a variant encloses `f` (its alternatives have no path of their own).
    pub fn in_variant(&self, f: usize) -> bool {
        let mut at = self.parent(f);
        while let Some(p) = at {
            if self.schema.fields[p].role == Role::Variant {
                return true;
            }
            at = self.parent(p);
        }
        false
    }

    /// The name uproot shows: members of tuples and pairs (`_0`, `_1`) lose their underscore;
    /// a member a record inherits under the name of another is prefixed with the classes it
    /// comes through (`Base::x`).
    pub fn display_name(&self, f: usize) -> &str {
        &self.display[f]
    }

    fn plain_name(&self, f: usize) -> &str {
        let name = &self.schema.fields[f].name;
        match self.parent(f) {
            Some(p) if self.schema.fields[p].role == Role::Record && is_numbered(name, "_") => {
                &name[1..]
            }
            _ => name,
        }
    }

    /// The members of record `f` in uproot's order: its own members first, then those of its
    /// base classes (last base first), recursively.
    pub fn record_members(&self, f: usize) -> Vec<usize> {
        let mut members = Vec::new();
        let mut stack = vec![f];
        while let Some(at) = stack.pop() {
            for &c in self.children(at) {
                if self.is_anonymous(c) {
                    stack.push(c);
                } else {
                    members.push(c);
                }
            }
        }
        members
    }

    /// Members of record `r` sharing a name are told apart as uproot does: each is prefixed with
    /// the type names of the classes it comes through, outermost first, until the names differ.
    fn rename_collisions(&mut self, r: usize) {
        let members = self.record_members(r);
        let mut groups: std::collections::HashMap<String, Vec<usize>> = Default::default();
        for &m in &members {
            groups.entry(self.display[m].clone()).or_default().push(m);
        }
        for group in groups.into_values().filter(|g| g.len() > 1) {
            // Ancestors of each member, innermost first, without those all of them share.
            let mut stacks: Vec<Vec<usize>> = group
                .iter()
                .map(|&m| {
                    let mut s = vec![m];
                    while let Some(p) = self.parent(*s.last().unwrap()) {
                        s.push(p);
                    }
                    s
                })
                .collect();
            while stacks
                .iter()
                .all(|s| s.len() > 1 && s.last() == stacks[0].last())
            {
                stacks.iter_mut().for_each(|s| {
                    s.pop();
                });
            }
            let labels: Vec<Vec<String>> = stacks
                .iter()
                .map(|s| {
                    let mut l = vec![self.display[s[0]].clone()];
                    l.extend(
                        s[1..]
                            .iter()
                            .map(|&a| self.schema.fields[a].type_name.clone()),
                    );
                    l
                })
                .collect();
            let name = |l: &[String], n: usize| -> String {
                let n = n.min(l.len() - 1);
                let mut parts: Vec<&str> =
                    l[1..].iter().rev().take(n).map(String::as_str).collect();
                parts.push(&l[0]);
                parts.join("::")
            };
            let mut prefixes = vec![0usize; group.len()];
            let longest = labels.iter().map(Vec::len).max().unwrap_or(1);
            let mut names: Vec<String> = labels.iter().map(|l| name(l, 0)).collect();
            for _ in 0..longest {
                let mut counts: std::collections::HashMap<&str, usize> = Default::default();
                names
                    .iter()
                    .for_each(|n| *counts.entry(n).or_default() += 1);
                let clashing: Vec<bool> = names.iter().map(|n| counts[n.as_str()] > 1).collect();
                if !clashing.contains(&true) {
                    break;
                }
                for (i, clash) in clashing.into_iter().enumerate() {
                    if clash {
                        prefixes[i] += 1;
                        names[i] = name(&labels[i], prefixes[i]);
                    }
                }
            }
            for (&m, n) in group.iter().zip(names) {
                self.display[m] = n;
            }
        }
    }

    /// The dotted path of `f` through the fields that are not anonymous ("jets.pt"); none for
    /// anonymous fields and alternatives of variants.
    pub fn path(&self, f: usize) -> Option<String> {
        if self.is_anonymous(f) || self.in_variant(f) {
            return None;
        }
        let mut parts = vec![self.display_name(f)];
        let mut at = self.parent(f);
        while let Some(p) = at {
            if !self.is_anonymous(p) {
                parts.push(self.display_name(p));
            }
            at = self.parent(p);
        }
        parts.reverse();
        Some(parts.join("."))
    }

    /// The subfields shown under `f`: its children, with anonymous ones replaced by theirs.
    pub fn visible_children(&self, f: usize) -> Vec<usize> {
        let mut out = Vec::new();
        for &c in &self.children[f] {
            if self.is_anonymous(c) {
                out.extend(self.visible_children(c));
            } else {
                out.push(c);
            }
        }
        out
    }

    /// Every field with a path, depth first (uproot's `keys()`), with its ID.
    pub fn keys(&self) -> Vec<(String, usize)> {
        fn walk(d: &Descriptor, fields: &[usize], prefix: &str, out: &mut Vec<(String, usize)>) {
            for &f in fields {
                let key = format!("{prefix}{}", d.display_name(f));
                let listed = !(d.is_anonymous(f) || d.in_variant(f));
                if listed {
                    out.push((key.clone(), f));
                }
                let sub = if listed {
                    format!("{key}.")
                } else {
                    prefix.to_string()
                };
                walk(d, &d.visible_children(f), &sub, out);
            }
        }
        let mut out = Vec::new();
        walk(self, &self.top_level, "", &mut out);
        out
    }
}

/// `name` is `prefix` followed by digits only (`_0`, `:_12`).
fn is_numbered(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::rntuple::schema::ColumnRecord;

    pub fn field(
        parent: usize,
        role: Role,
        name: &str,
        type_name: &str,
        repetition: u64,
    ) -> FieldRecord {
        FieldRecord {
            field_version: 0,
            type_version: 0,
            parent,
            role,
            name: name.into(),
            type_name: type_name.into(),
            type_alias: String::new(),
            description: String::new(),
            repetition,
            source: None,
        }
    }

    pub fn descriptor(fields: Vec<FieldRecord>, columns: Vec<ColumnRecord>) -> Result<Descriptor> {
        let header = Header {
            name: "t".into(),
            description: String::new(),
            writer: String::new(),
            schema: Schema {
                fields,
                columns,
                aliases: vec![],
            },
            checksum: 0,
        };
        let footer = Footer {
            extension: Schema::default(),
            groups: vec![],
        };
        Descriptor::new(&Anchor::default(), header, footer, "test")
    }

    #[test]
    fn keys_paths_and_anonymous_fields_follow_uproot() {
        let d = descriptor(
            vec![
                field(0, Role::Collection, "jets", "std::vector<Jet>", 0),
                field(0, Role::Record, "_0", "Jet", 0),
                field(1, Role::Record, ":_0", "Base", 0),
                field(2, Role::Leaf, "id", "std::int32_t", 0),
                field(1, Role::Leaf, "pt", "float", 0),
                field(5, Role::Record, "pair", "std::pair<float,float>", 0),
                field(5, Role::Leaf, "_0", "float", 0),
                field(5, Role::Leaf, "_1", "float", 0),
                field(8, Role::Leaf, "bits", "std::bitset<3>", 3),
            ],
            vec![],
        )
        .unwrap();
        let keys: Vec<String> = d.keys().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            keys,
            ["jets", "jets.id", "jets.pt", "pair", "pair.0", "pair.1", "bits"]
        );
        assert_eq!(d.path(4).as_deref(), Some("jets.pt"));
        assert!(d.is_anonymous(1) && d.is_anonymous(2));
        assert_eq!(d.repetitions(8), Some(3));
    }

    #[test]
    fn parents_after_children_are_refused() {
        let e = descriptor(
            vec![
                field(1, Role::Leaf, "x", "float", 0),
                field(1, Role::Record, "r", "R", 0),
            ],
            vec![],
        )
        .unwrap_err();
        assert!(e.to_string().contains("parent"), "{e}");
    }
}
