"""Write branch-layouts.root: small TTrees whose branches uproot reads through their layout
rather than their type: split objects read whole (records of their sub-branches, uproot's
AsGroup), STL and object members of the classes in split collections (streamer types 300 and
61 in a TClonesArray or a split std::vector<Class>), classes without ClassDef inside nested
collections (written with version 0 and their checksum), fBits of referenced objects (followed
by a process id) in a TClonesArray, a string branch without entry offsets
and a branch filled for fewer entries than its tree. Needs ROOT (``bash scripts/setup-bench.sh``);
run once, the output is committed:

    .venv/bin/python tests/data/make_branch_layouts.py

tests/test_branch_layouts.py compares every branch with uproot.
"""

from __future__ import annotations

from pathlib import Path

import ROOT
from aclic import compile_classes, write_file

OUT = Path(__file__).with_name("branch-layouts.root")
ENTRIES = 30

CLASSES = r"""
#include <vector>
#include <string>
#include "TObject.h"
#include "TClonesArray.h"
#include "TVector3.h"
#include "TTree.h"

struct Coords {
   float x, y, z;
};

struct Vertex {
   Coords where;
   int ntracks;
   double chi2;
};

class RunInfo : public TObject {
public:
   int run;
   std::string tag;
   RunInfo() : run(0) {}
   ClassDef(RunInfo, 2)
};

struct Hit {
   float e;
   std::vector<double> usr;
   std::vector<std::string> names;
   std::string label;
   TVector3 pos;
};

class Track : public TObject {
public:
   float pt;
   std::vector<double> usr;
   TVector3 dir;
   Track() : pt(0) {}
   ClassDef(Track, 1)
};

struct Fit {
   float mom;
   double time;
   int sid;
};

inline void fill_hits(std::vector<Hit>& hits, int i) {
   hits.clear();
   for (int j = 0; j < i % 4; j++) {
      Hit h;
      h.e = 0.5f * i + j;
      for (int k = 0; k < (i + j) % 3; k++) {
         h.usr.push_back(i + 0.25 * k);
         h.names.push_back("u" + std::to_string(k));
      }
      h.label = "hit " + std::to_string(i) + "/" + std::to_string(j);
      h.pos.SetXYZ(i, j, -i * j);
      hits.push_back(h);
   }
}

inline void write_layouts(int entries) {
   TTree *tree = new TTree("layouts", "split objects and members of split collections");
   auto *vertex = new Vertex();
   auto *info = new RunInfo();
   auto *hits = new std::vector<Hit>();
   auto *tracks = new TClonesArray("Track");
   auto *fits = new std::vector<std::vector<Fit>>();
   tree->Branch("vertex.", &vertex, 32000, 99);
   tree->Branch("vertex_nodot", &vertex, 32000, 99);
   tree->Branch("info", &info, 32000, 99);
   tree->Branch("hits", &hits, 32000, 99);
   tree->Branch("tracks", &tracks, 32000, 99);
   tree->Branch("fits", &fits, 32000, 0);
   char str[32];
   TBranch *sb = tree->Branch("str", str, "str/C");
   sb->SetEntryOffsetLen(0);
   int late = 0;
   for (int i = 0; i < entries; i++) {
      vertex->where.x = i; vertex->where.y = -0.5f * i; vertex->where.z = 2.0f * i;
      vertex->ntracks = i % 7; vertex->chi2 = 0.1 * i;
      info->run = 1000 + i; info->tag = "run" + std::to_string(i);
      fill_hits(*hits, i);
      tracks->Clear();
      for (int j = 0; j < i % 3; j++) {
         Track *t = (Track *)tracks->ConstructedAt(j);
         t->pt = 1.5f * j + i;
         t->usr.clear();
         for (int k = 0; k < j; k++) t->usr.push_back(k - i);
         t->dir.SetXYZ(j, i, 1);
         // Objects a TRef points to carry a process id after fBits.
         t->SetBit(kIsReferenced, j == 1);
      }
      fits->clear();
      for (int j = 0; j < i % 3; j++) {
         std::vector<Fit> inner;
         for (int k = 0; k <= j; k++) inner.push_back(Fit{float(i + k), 0.5 * j, k});
         fits->push_back(inner);
      }
      snprintf(str, sizeof(str), "entry-%d", i);
      if (i == entries / 2) tree->Branch("late", &late, "late/I");
      late = i;
      tree->Fill();
   }
   tree->Write();
}

#ifdef __ROOTCLING__
#pragma link C++ class Coords+;
#pragma link C++ class Vertex+;
#pragma link C++ class RunInfo+;
#pragma link C++ class Hit+;
#pragma link C++ class Track+;
#pragma link C++ class Fit+;
#pragma link C++ class std::vector<Hit>+;
#pragma link C++ class std::vector<Fit>+;
#pragma link C++ class std::vector<std::vector<Fit>>+;
#pragma link C++ function write_layouts;
#endif
"""


def main() -> None:
    compile_classes(CLASSES, "BranchLayouts.h")
    write_file(OUT, ROOT.write_layouts, ENTRIES)


if __name__ == "__main__":
    main()
