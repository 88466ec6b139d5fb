"""Write member-layouts.root with ROOT: member layouts whose reading depends on the class's own
streamer or on how the member is declared, as in experiments' files.

- ``Event`` split: a ``TClonesArray *hits`` member (uproot reads it as the record of its members'
  branches; a ``TClonesArray`` branch of the tree is the number of objects), a ``TDatime``
  member, and a split ``std::vector<Tag> tags`` whose ``Tag`` has a ``TString`` member;
- ``Track`` with fixed arrays of objects, ``Mom m[2]`` (a TObject: streamer type 81) and ``Pt
  q[3]`` (not one: 82), each object with its header: in a split TClonesArray ``tracks``, split
  alone (``track``) and unsplit (``track0``); ``Track`` also has a ``TArrayF w`` (TArray::Streamer
  writes fN and the numbers bare), and ``arr`` is a ``TArrayD`` branch;
- ``labels`` split: a ``TClonesArray`` of ``Label`` with a ``TString`` member (streamer type 65:
  each object's string bare, a length, then the characters; some past 254 characters);
- ``Stamp`` unsplit: a ``TDatime`` member (TDatime::Streamer writes its 4 bytes bare, with no
  byte count or version);
- leaf lists of ``Double32_t x[2][3]/d[0,1,10]`` and ``Float16_t f[2][3]/f[0,0,10]`` (uproot
  reads fLen items: their leaves' titles are the type and range).

Needs ROOT and a C++ compiler (``bash scripts/setup-bench.sh``); run once, the output is committed:

    .venv/bin/python tests/data/make_member_layouts.py

tests/test_member_layouts.py compares the branches with uproot and with ROOT's values.
"""

from __future__ import annotations

from pathlib import Path

import ROOT
from aclic import compile_classes, write_file

OUT = Path(__file__).with_name("member-layouts.root")
ENTRIES = 9

CLASSES = r"""
#include "TObject.h"
#include "TClonesArray.h"
#include "TDatime.h"
#include "TString.h"
#include "TArrayD.h"
#include "TArrayF.h"
#include "TTree.h"
#include <vector>

class Hit : public TObject {
public:
   Float_t e;
   Int_t cell;
   Hit() : e(0), cell(0) {}
   ClassDef(Hit, 1)
};

class Label : public TObject {
public:
   TString text;
   Int_t k;
   Label() : k(0) {}
   ClassDef(Label, 1)
};

class Mom : public TObject {
public:
   Double_t px, pz;
   Mom() : px(0), pz(0) {}
   ClassDef(Mom, 1)
};

class Pt {
public:
   Float_t x, y;
   Pt() : x(0), y(0) {}
   virtual ~Pt() {}
   ClassDef(Pt, 1)
};

class Track : public TObject {
public:
   Int_t id;
   Mom m[2];
   Pt q[3];
   TArrayF w;
   Track() : id(0) {}
   void Set(int i) {
      id = i;
      w.Set(i % 4);
      for (int k = 0; k < i % 4; k++)
         w[k] = 0.5f * i + k;
      for (int k = 0; k < 2; k++) {
         m[k].px = i + 0.5 * k;
         m[k].pz = -i - 0.25 * k;
      }
      for (int k = 0; k < 3; k++) {
         q[k].x = 10 * i + k;
         q[k].y = 0.5f * k - i;
      }
   }
   ClassDef(Track, 1)
};

class Tag {
public:
   TString name;
   Int_t id;
   Tag() : id(0) {}
   virtual ~Tag() {}
   ClassDef(Tag, 1)
};

class Event : public TObject {
public:
   Int_t n;
   TDatime when;
   TClonesArray *hits;
   std::vector<Tag> tags;
   Event() : n(0), hits(new TClonesArray("Hit")) {}
   ~Event() { delete hits; }
   ClassDef(Event, 1)
};

class Stamp {
public:
   TDatime when;
   Int_t run;
   Stamp() : run(0) {}
   virtual ~Stamp() {}
   ClassDef(Stamp, 1)
};

inline void write_layouts(int entries) {
   TTree *tree = new TTree("layouts", "member layouts");
   auto *event = new Event();
   auto *clones = new TClonesArray("Hit");
   auto *labels = new TClonesArray("Label");
   auto *tracks = new TClonesArray("Track");
   auto *track = new Track();
   auto *track0 = new Track();
   auto *arr = new TArrayD();
   auto *stamp = new Stamp();
   Double_t x[2][3];
   Float_t f[2][3];
   tree->Branch("event", &event, 32000, 99);
   tree->Branch("clones", &clones, 32000, 99);
   tree->Branch("labels", &labels, 32000, 99);
   tree->Branch("tracks", &tracks, 32000, 99);
   tree->Branch("track", &track, 32000, 99);
   tree->Branch("track0", &track0, 32000, 0);
   tree->Branch("arr", &arr, 32000, 0);
   tree->Branch("stamp", &stamp, 32000, 0);
   tree->Branch("x", x, "x[2][3]/d[0,1,10]");
   tree->Branch("f", f, "f[2][3]/f[0,0,10]");
   for (int i = 0; i < entries; i++) {
      event->n = i;
      event->when.Set(2020 + i, 1 + i, 2 + i, 3 + i, 4 + i, 5 + i);
      event->hits->Clear();
      clones->Clear();
      event->tags.clear();
      labels->Clear();
      tracks->Clear();
      for (int j = 0; j < i % 3; j++)
         ((Track *)tracks->ConstructedAt(j))->Set(10 * i + j);
      track->Set(i);
      track0->Set(-i);
      arr->Set(i);
      for (int k = 0; k < i; k++)
         (*arr)[k] = i - 0.125 * k;
      for (int j = 0; j < i % 4; j++) {
         Hit *h = (Hit *)event->hits->ConstructedAt(j);
         h->e = i + 0.25f * j;
         h->cell = 100 * i + j;
         Hit *c = (Hit *)clones->ConstructedAt(j);
         c->e = -h->e;
         c->cell = -h->cell;
      }
      for (int j = 0; j < i % 3; j++) {
         Label *l = (Label *)labels->ConstructedAt(j);
         // Lengths past 254 take the long form (255, then 4 bytes).
         l->text = TString('a' + j, j == 1 ? 300 + i : i);
         l->k = 10 * i + j;
      }
      for (int j = 0; j < (i + 1) % 3; j++) {
         Tag t;
         t.name = TString::Format("tag%d.%d", i, j);
         t.id = 10 * i + j;
         event->tags.push_back(t);
      }
      stamp->when.Set(1999, 12, 31, 23, 59, i);
      stamp->run = 1000 + i;
      for (int a = 0; a < 2; a++)
         for (int b = 0; b < 3; b++) {
            x[a][b] = (i * 6 + a * 3 + b) / 64.0;
            f[a][b] = 1.5f * (i - 4) + 0.25f * (a * 3 + b);
         }
      tree->Fill();
   }
   tree->Write();
}

#ifdef __ROOTCLING__
#pragma link C++ class Hit+;
#pragma link C++ class Label+;
#pragma link C++ class Mom+;
#pragma link C++ class Pt+;
#pragma link C++ class Track+;
#pragma link C++ class Tag+;
#pragma link C++ class std::vector<Tag>+;
#pragma link C++ class Event+;
#pragma link C++ class Stamp+;
#pragma link C++ function write_layouts;
#endif
"""


def main() -> None:
    compile_classes(CLASSES, "MemberLayouts.h")
    write_file(OUT, ROOT.write_layouts, ENTRIES)


if __name__ == "__main__":
    main()
