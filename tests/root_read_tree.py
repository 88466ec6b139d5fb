"""Read branches of a tree with ROOT's TTreeReader and print them as JSON, one list of entries per
branch (run by tests/test_write_ttree.py in a process of its own: ROOT is the oracle where it
imports, and its crash fails one test, not the run).

    python tests/root_read_tree.py FILE TREE BRANCH...

Numbers come as they are; a leaf of several numbers (fixed-size, counted, or both) as each
entry's numbers in a flat list (as TTreeReaderArray gives them; a counted leaf of fixed-size arrays
through its TLeaf, as doubles); std::vector<T>, strings and std::vector<std::vector<T>> keep their
structure. The reading is compiled C++ (through cling), so
what is checked is ROOT's I/O, not PyROOT's conversions."""

import json
import sys

import ROOT

ROOT.gErrorIgnoreLevel = ROOT.kWarning
ROOT.gInterpreter.Declare(
    r"""
#include <TFile.h>
#include <TLeaf.h>
#include <TTree.h>
#include <TTreeReader.h>
#include <TTreeReaderArray.h>
#include <TTreeReaderValue.h>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace cherenkov_check {
template <typename T> void put(std::ostringstream &out, const T &x) {
   if constexpr (std::is_same_v<T, bool>) {
      out << (x ? "true" : "false");
   } else if constexpr (std::is_same_v<T, std::string>) {
      out << '"';
      for (unsigned char c : x) {
         if (c == '"' || c == '\\') out << '\\' << c;
         else if (c < 0x20) { char u[8]; std::snprintf(u, sizeof u, "\\u%04x", c); out << u; }
         else out << c;
      }
      out << '"';
   } else if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x)) out << "NaN";
      else if (std::isinf(x)) out << (x > 0 ? "Infinity" : "-Infinity");
      else { char b[40]; std::snprintf(b, sizeof b, "%.17g", (double)x); out << b; }
   } else {
      out << +x;
   }
}
template <typename C> void put_all(std::ostringstream &out, const C &items) {
   out << "[";
   bool first = true;
   for (const auto &x : items) {
      if (!first) out << ",";
      first = false;
      put(out, x);
   }
   out << "]";
}

// mode: 0 one value (TTreeReaderValue<T>), 1 numbers of a leaf (TTreeReaderArray<T>),
// 2 a std::vector<T>, 3 a std::vector<std::vector<T>>.
template <typename T> std::string read(const char *path, const char *tree, const char *branch, int mode) {
   TFile f(path);
   TTreeReader r(tree, &f);
   std::ostringstream out;
   out << "[";
   auto entries = [&](auto &&one) {
      for (bool first = true; r.Next(); first = false) {
         if (!first) out << ",";
         one();
      }
   };
   if (mode == 0) {
      TTreeReaderValue<T> v(r, branch);
      entries([&] { put(out, *v); });
   } else if (mode == 1) {
      TTreeReaderArray<T> v(r, branch);
      entries([&] { put_all(out, v); });
   } else if (mode == 2) {
      TTreeReaderValue<std::vector<T>> v(r, branch);
      entries([&] { put_all(out, *v); });
   } else {
      TTreeReaderValue<std::vector<std::vector<T>>> v(r, branch);
      entries([&] {
         out << "[";
         for (size_t i = 0; i < v->size(); ++i) {
            if (i) out << ",";
            put_all(out, (*v)[i]);
         }
         out << "]";
      });
   }
   out << "]";
   return out.str();
}
// A counted leaf of fixed-size arrays (x[n][3]), whose numbers TTreeReaderArray cuts at the count
// (in files ROOT writes too): read with TTree::GetEntry, as doubles.
std::string leaf_values(const char *path, const char *tree, const char *branch) {
   TFile f(path);
   auto t = f.Get<TTree>(tree);
   TLeaf *leaf = t->GetLeaf(branch);
   std::ostringstream out;
   out << "[";
   for (Long64_t e = 0; e < t->GetEntries(); ++e) {
      t->GetEntry(e);
      out << (e ? ",[" : "[");
      for (int k = 0; k < leaf->GetLen(); ++k) {
         if (k) out << ",";
         put(out, leaf->GetValue(k));
      }
      out << "]";
   }
   out << "]";
   return out.str();
}
}  // namespace cherenkov_check
"""
)

LEAF_TYPES = {
    "Bool_t": "bool",
    "Char_t": "char",
    "UChar_t": "unsigned char",
    "Short_t": "short",
    "UShort_t": "unsigned short",
    "Int_t": "int",
    "UInt_t": "unsigned int",
    "Long64_t": "Long64_t",
    "ULong64_t": "ULong64_t",
    "Float_t": "float",
    "Double_t": "double",
}


def how_to_read(tree, name: str) -> tuple[str, int]:
    """The C++ item type and `read` mode of branch `name`."""
    branch = tree.GetBranch(name)
    if branch.InheritsFrom("TBranchElement"):
        class_name = branch.GetClassName().replace(" ", "")
        if class_name == "string":
            return "std::string", 0
        depth = 0
        while class_name.startswith("vector<"):
            class_name, depth = class_name[len("vector<") : -1], depth + 1
        item = "std::string" if class_name == "string" else class_name
        return item, 1 + depth
    leaf = branch.GetLeaf(name)
    if leaf.GetLeafCount() and leaf.GetLenStatic() > 1:
        return "double", 4
    several = bool(leaf.GetLeafCount()) or leaf.GetLenStatic() > 1
    return LEAF_TYPES[leaf.GetTypeName()], 1 if several else 0


def main(path: str, tree_name: str, names: list[str]) -> dict:
    file = ROOT.TFile.Open(path)  # kept: the tree lives as long as its file
    tree = file.Get(tree_name)
    out = {}
    for name in names:
        item, mode = how_to_read(tree, name)
        if mode == 3 and item not in ("float", "double"):
            # ROOT ships collection dictionaries for vector<vector<float|double> > only; a
            # program reading others makes theirs (as for files ROOT writes).
            ROOT.gInterpreter.GenerateDictionary(f"vector<vector<{item}> >", "vector")
        if mode == 4:
            text = ROOT.cherenkov_check.leaf_values(path, tree_name, name)
        else:
            text = ROOT.cherenkov_check.read[item](path, tree_name, name, mode)
        out[name] = json.loads(str(text))
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], sys.argv[3:])))
