"""Write branch-types.root: small TTrees holding the branch types real files carry and that only
ROOT writes (RDataFrame's RVec, Double32_t/Float16_t with and without ranges, split and unsplit
std::vector<Class>, nested STL, maps of strings and collections, TClonesArray members with fixed
arrays, TLorentzVector, templated classes like ATLAS' ElementLink, leaf-list Double32_t/Float16_t
and ROOT's own reading of every packed number, to compare with). Needs
ROOT (``bash scripts/setup-bench.sh``); run once, the output is committed:

    .venv/bin/python tests/data/make_branch_types.py

tests/test_branch_types.py compares every branch with uproot.
"""

from __future__ import annotations

from pathlib import Path

import ROOT
from aclic import compile_classes

OUT = Path(__file__).with_name("branch-types.root")
ENTRIES = 40

CLASSES = r"""
#include <vector>
#include <string>
#include <map>
#include <set>
#include <array>
#include "TObject.h"
#include "TClonesArray.h"
#include "TLorentzVector.h"
#include "TTree.h"
#include "TFile.h"

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

// As xAOD's TrigConfKeys: without ClassDef, written unsplit with no header of its own.
struct Keys {
   unsigned int smk;
   unsigned int l1psk;
   unsigned int hltpsk;
};

// As ATLAS' ElementLink<T>: a template class whose members are in a base class.
struct LinkBase {
   unsigned int m_persKey;
   unsigned int m_persIndex;
};

template <typename T>
struct Link : public LinkBase {};

struct Event {
   int run;
   float weight;
   Double32_t scaled;        //[0,1000,24]
   Double32_t angle;         //[-pi,pi,8]
   Double32_t full;          //[0,1,32]
   Double32_t bits14;        //[0,0,14]
   Float16_t f16bits;        //[0,0,8]
   Double32_t vals[2];       //[0,10,12]
   int adc[4];
   std::vector<float> energies;
   std::vector<std::vector<int>> nested;
   std::vector<std::string> names;
   std::string label;
   std::map<int, double> calib;
   std::set<int> flags;
   std::map<int, std::vector<short>> lists;
   std::map<std::string, std::string> tags;
   std::map<std::string, int> counts;
   std::vector<Link<Hit>> links;
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
   auto *link_lists = new std::vector<std::vector<Link<Hit>>>();
   auto *names_by_id = new std::map<int, std::string>();
   auto *empty_or_not = new std::map<int, std::string>();
   auto *keys = new Keys();
   tree->Branch("event", &event, 32000, 99);
   tree->Branch("hits", &hits_split, 32000, 99);
   tree->Branch("hits_whole", &hits_whole, 32000, 0);
   tree->Branch("tracks", &tracks, 32000, 99);
   tree->Branch("p4", &p4);
   tree->Branch("d32s", &d32);
   tree->Branch("link_lists", &link_lists);
   tree->Branch("names_by_id", &names_by_id, 32000, 0);
   tree->Branch("empty_or_not", &empty_or_not, 32000, 0);
   tree->Branch("keys", &keys, 32000, 0);
   for (int i = 0; i < entries; i++) {
      event->run = i; event->weight = 0.5f * i; event->scaled = 3.7 * i;
      keys->smk = 2216 + i; keys->l1psk = 76 * i; keys->hltpsk = 260 - i;
      event->angle = -3.1 + 0.155 * i; event->full = 0.0249 * i; event->bits14 = 1.37 * i - 20;
      event->f16bits = 0.77f * i - 9; event->vals[0] = 0.26 * i; event->vals[1] = 9.9 - 0.24 * i;
      for (int k = 0; k < 4; k++) event->adc[k] = 10 * i + k;
      event->energies.clear(); event->nested.clear(); event->names.clear();
      event->calib.clear(); event->flags.clear(); event->lists.clear(); event->tags.clear();
      event->counts.clear(); event->links.clear(); link_lists->clear(); names_by_id->clear();
      empty_or_not->clear();
      for (int j = 0; j < i % 3; j++) {
         event->energies.push_back(1.25f * j + i);
         std::vector<int> inner;
         for (int k = 0; k < j; k++) inner.push_back(i + k);
         event->nested.push_back(inner);
         event->names.push_back("n" + std::to_string(i) + "_" + std::to_string(j));
         event->calib[j] = 0.5 * j + i;
         event->flags.insert(i * j);
         Link<Hit> link; link.m_persKey = 1000u + i; link.m_persIndex = j;
         event->links.push_back(link);
         link_lists->push_back(std::vector<Link<Hit>>(j + 1, link));
         (*empty_or_not)[j - i] = std::string(j + 1, 'a' + j);
      }
      // Never empty: uproot misreads empty maps of strings or collections (it expects the
      // column headers ROOT leaves out when there are no pairs), and they are compared with it.
      for (int j = 0; j <= i % 3; j++) {
         std::vector<short> shorts;
         for (int k = 0; k <= j; k++) shorts.push_back(short(i - k));
         event->lists[i + j] = shorts;
         event->tags["k" + std::to_string(j)] = "v" + std::to_string(i * j);
         event->counts["c" + std::to_string(i + j)] = i - j;
         (*names_by_id)[j - i] = std::string(j + 1, 'a' + j);
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

inline void write_leaf_lists(int entries) {
   // Double32_t / Float16_t in leaf lists (TLeafD32, TLeafF16): the range follows the type.
   TTree *tree = new TTree("leaflist", "packed numbers in leaf lists");
   int n = 0;
   Double32_t x = 0, plain = 0, bits = 0, arr[3] = {0, 0, 0}, var[4] = {0, 0, 0, 0};
   Float16_t f = 0, fr = 0;
   tree->Branch("x", &x, "x/d[-2.71,10,20]");
   tree->Branch("full", &plain, "full/d[0,100,32]");
   tree->Branch("bits", &bits, "bits/d[0,0,10]");
   tree->Branch("arr", arr, "arr[3]/d[0,1,8]");
   tree->Branch("f", &f, "f/f");
   tree->Branch("fr", &fr, "fr/f[-1,1,12]");
   tree->Branch("n", &n, "n/I");
   tree->Branch("var", var, "var[n]/d[0,50,16]");
   for (int i = 0; i < entries; i++) {
      x = 0.3 * i - 2; plain = 2.49 * i; bits = 1.7 * i - 30; f = 0.11f * i; fr = 0.05f * i - 1;
      for (int k = 0; k < 3; k++) arr[k] = 0.02 * i + 0.1 * k;
      n = i % 5;
      for (int k = 0; k < n; k++) var[k] = 1.3 * i + k;
      tree->Fill();
   }
   tree->Write();
}

inline void write_readback(const char *path, int entries) {
   // ROOT's own reading of every packed number above, as plain doubles: the tests compare
   // cherenkov's decoding with these, bit for bit.
   TFile f(path, "UPDATE");
   TTree *objects = (TTree *)f.Get("objects");
   TTree *leaflist = (TTree *)f.Get("leaflist");
   Event *event = nullptr;
   auto *hits = new std::vector<Hit>();
   objects->SetBranchAddress("event", &event);
   objects->SetBranchAddress("hits", &hits);
   int n = 0;
   Double32_t x = 0, full = 0, bits = 0, arr[3], var[4];
   Float16_t fl = 0, fr = 0;
   leaflist->SetBranchAddress("x", &x);
   leaflist->SetBranchAddress("full", &full);
   leaflist->SetBranchAddress("bits", &bits);
   leaflist->SetBranchAddress("arr", arr);
   leaflist->SetBranchAddress("f", &fl);
   leaflist->SetBranchAddress("fr", &fr);
   leaflist->SetBranchAddress("n", &n);
   leaflist->SetBranchAddress("var", var);
   TTree *out = new TTree("readback", "packed numbers as ROOT reads them");
   std::map<std::string, double> scalars;
   const char *scalar_names[] = {"scaled", "angle", "full", "bits14", "f16bits", "vals0", "vals1",
                                 "x", "leaf_full", "leaf_bits", "f", "fr"};
   for (auto name : scalar_names) out->Branch(name, &scalars[name]);
   // Lists as counted leaf arrays of doubles (a std::vector<double> would be written as the
   // std::vector<Double32_t> linked above).
   const char *list_names[] = {"hits_energy", "hits_f16", "hits_f16r", "hits_d32bits", "arr", "var"};
   std::map<std::string, int> counts;
   std::map<std::string, std::array<double, 8>> lists;
   for (auto name : list_names) {
      std::string n = std::string("n_") + name;
      out->Branch(n.c_str(), &counts[name], (n + "/I").c_str());
      out->Branch(name, lists[name].data(), (std::string(name) + "[" + n + "]/D").c_str());
   }
   auto push = [&](const char *name, double v) { lists[name][counts[name]++] = v; };
   for (int i = 0; i < entries; i++) {
      objects->GetEntry(i);
      leaflist->GetEntry(i);
      scalars["scaled"] = event->scaled; scalars["angle"] = event->angle;
      scalars["full"] = event->full; scalars["bits14"] = event->bits14;
      scalars["f16bits"] = event->f16bits; scalars["vals0"] = event->vals[0];
      scalars["vals1"] = event->vals[1]; scalars["x"] = x; scalars["leaf_full"] = full;
      scalars["leaf_bits"] = bits; scalars["f"] = fl; scalars["fr"] = fr;
      for (auto &c : counts) c.second = 0;
      for (auto &h : *hits) {
         push("hits_energy", h.energy); push("hits_f16", h.f16);
         push("hits_f16r", h.f16r); push("hits_d32bits", h.d32bits);
      }
      for (int k = 0; k < 3; k++) push("arr", arr[k]);
      for (int k = 0; k < n; k++) push("var", var[k]);
      out->Fill();
   }
   out->Write();
   f.Close();
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
#pragma link C++ class Keys+;
#pragma link C++ class LinkBase+;
#pragma link C++ class Link<Hit>+;
#pragma link C++ class std::vector<Link<Hit>>+;
#pragma link C++ class std::vector<std::vector<Link<Hit>>>+;
#pragma link C++ class std::map<int,std::vector<short>>+;
#pragma link C++ class std::map<std::string,std::string>+;
#pragma link C++ class std::map<std::string,int>+;
#pragma link C++ class std::map<int,std::string>+;
#pragma link C++ function write_leaf_lists;
#pragma link C++ function write_readback;
#pragma link C++ function write_objects;
#pragma link C++ function write_repeated_name;
#endif
"""


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
    compile_classes(CLASSES, "BranchTypes.h")
    f = ROOT.TFile(str(OUT), "RECREATE")
    ROOT.write_objects(ENTRIES)
    ROOT.write_repeated_name(ENTRIES)
    ROOT.write_leaf_lists(ENTRIES)
    f.Close()
    ROOT.write_readback(str(OUT), ENTRIES)
    write_snapshot()
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
