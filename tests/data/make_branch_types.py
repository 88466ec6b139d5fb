"""Write branch-types.root: small TTrees holding the branch types real files carry and that only
ROOT writes (RDataFrame's RVec, Double32_t/Float16_t with and without ranges, split and unsplit
std::vector<Class>, nested STL, TClonesArray members with fixed arrays, TLorentzVector). Needs
ROOT (``bash scripts/setup-bench.sh``); run once, the output is committed:

    .venv/bin/python tests/data/make_branch_types.py

tests/test_branch_types.py compares every branch with uproot.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import ROOT

OUT = Path(__file__).with_name("branch-types.root")
ENTRIES = 40

CLASSES = r"""
#include <vector>
#include <string>
#include <map>
#include <set>
#include "TObject.h"
#include "TClonesArray.h"
#include "TLorentzVector.h"
#include "TTree.h"

struct Hit {
   float x;
   int id;
   double pos[3];
   Double32_t energy;        //[0,100,16]
   Double32_t plain;
   Float16_t f16;
   Float16_t f16r;           //[-10,10,12]
   Double32_t d32bits;       //[0,0,10]
};

class Track : public TObject {
public:
   float fP[3];
   int fCharge;
   Double32_t fMass;         //[0,10,20]
   Track() : fCharge(0), fMass(0) { fP[0] = fP[1] = fP[2] = 0; }
   ClassDef(Track, 1)
};

struct Event {
   int run;
   float weight;
   Double32_t scaled;        //[0,1000,24]
   int adc[4];
   std::vector<float> energies;
   std::vector<std::vector<int>> nested;
   std::vector<std::string> names;
   std::string label;
   std::map<int, double> calib;
   std::set<int> flags;
};

inline void fill_hits(std::vector<Hit>& hits, int i) {
   hits.clear();
   for (int j = 0; j < i % 4; j++) {
      Hit h;
      h.x = 0.5f * i + j; h.id = 100 * i + j;
      for (int k = 0; k < 3; k++) h.pos[k] = i + 0.25 * k;
      h.energy = 1.5 * j + 0.01 * i; h.plain = 0.1 * i - j;
      h.f16 = 0.3f * i; h.f16r = -5 + 0.2f * j; h.d32bits = 2.5 * j;
      hits.push_back(h);
   }
}

inline void write_objects(int entries) {
   TTree *tree = new TTree("objects", "split and unsplit objects and collections");
   Event *event = new Event();
   auto *hits_split = new std::vector<Hit>();
   auto *hits_whole = new std::vector<Hit>();
   auto *tracks = new TClonesArray("Track");
   auto *p4 = new TLorentzVector();
   auto *d32 = new std::vector<Double32_t>();
   tree->Branch("event", &event, 32000, 99);
   tree->Branch("hits", &hits_split, 32000, 99);
   tree->Branch("hits_whole", &hits_whole, 32000, 0);
   tree->Branch("tracks", &tracks, 32000, 99);
   tree->Branch("p4", &p4);
   tree->Branch("d32s", &d32);
   for (int i = 0; i < entries; i++) {
      event->run = i; event->weight = 0.5f * i; event->scaled = 3.7 * i;
      for (int k = 0; k < 4; k++) event->adc[k] = 10 * i + k;
      event->energies.clear(); event->nested.clear(); event->names.clear();
      event->calib.clear(); event->flags.clear();
      for (int j = 0; j < i % 3; j++) {
         event->energies.push_back(1.25f * j + i);
         std::vector<int> inner;
         for (int k = 0; k < j; k++) inner.push_back(i + k);
         event->nested.push_back(inner);
         event->names.push_back("n" + std::to_string(i) + "_" + std::to_string(j));
         event->calib[j] = 0.5 * j + i;
         event->flags.insert(i * j);
      }
      event->label = "event " + std::to_string(i);
      fill_hits(*hits_split, i);
      fill_hits(*hits_whole, i);
      tracks->Clear();
      for (int j = 0; j < i % 5; j++) {
         Track *t = (Track *)tracks->ConstructedAt(j);
         t->fP[0] = i; t->fP[1] = j; t->fP[2] = i * j;
         t->fCharge = j % 2 ? 1 : -1;
         t->fMass = 0.1 * j + 0.01 * i;
      }
      p4->SetPxPyPzE(i, -i, 0.5 * i, 2.0 * i + 1);
      d32->clear();
      for (int j = 0; j < i % 3; j++) d32->push_back(0.1 * i + j);
      tree->Fill();
   }
   tree->Write();
}

inline void write_repeated_name(int entries) {
   // Delphes writes `Particle_size` twice: readers must agree on which one a name means.
   TTree *tree = new TTree("repeated", "two branches with one name");
   int first = 0, second = 0;
   tree->Branch("x", &first, "x/I");
   tree->Branch("x", &second, "x/I");
   for (int i = 0; i < entries; i++) {
      first = i;
      second = 100 + i;
      tree->Fill();
   }
   tree->Write();
}

#ifdef __ROOTCLING__
#pragma link C++ class Hit+;
#pragma link C++ class Track+;
#pragma link C++ class Event+;
#pragma link C++ class std::vector<Hit>+;
#pragma link C++ class std::vector<std::vector<int>>+;
#pragma link C++ class std::map<int,double>+;
#pragma link C++ class std::set<int>+;
#pragma link C++ class std::vector<Double32_t>+;
#pragma link C++ function write_objects;
#pragma link C++ function write_repeated_name;
#endif
"""


def compile_classes() -> None:
    """Compile the classes with a dictionary (ACLiC), as experiments do: interpreted classes
    crash ROOT's writer for some members (std::vector<std::string> in a split object)."""
    build = Path(tempfile.mkdtemp(prefix="branch-types-"))
    header = build / "BranchTypes.h"
    header.write_text(CLASSES)
    if ROOT.gSystem.CompileMacro(str(header), "kO", "", str(build)) != 1:
        raise SystemExit("ACLiC could not compile the classes (is a C++ compiler installed?)")


def write_snapshot() -> None:
    df = ROOT.RDataFrame(ENTRIES)
    df = (
        df.Define("n", "int(rdfentry_ % 4)")
        .Define("pt", "ROOT::RVecF v(n); for (int j = 0; j < n; j++) v[j] = 1.5f * j + rdfentry_; return v;")
        .Define("ids", "ROOT::RVecI v(n); for (int j = 0; j < n; j++) v[j] = j - int(rdfentry_); return v;")
        .Define("mass", "double(rdfentry_) * 0.25")
    )
    opts = ROOT.RDF.RSnapshotOptions()
    opts.fMode = "UPDATE"
    df.Snapshot("snapshot", str(OUT), ["n", "pt", "ids", "mass"], opts)


def main() -> None:
    compile_classes()
    f = ROOT.TFile(str(OUT), "RECREATE")
    ROOT.write_objects(ENTRIES)
    ROOT.write_repeated_name(ENTRIES)
    f.Close()
    write_snapshot()
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
