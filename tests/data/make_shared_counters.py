"""Write shared-counters.root with ROOT: jagged leaf arrays that share a counter (``a[n]/F``,
``b[n]/F``, ``e[n][2]/F``, as NanoAOD's ``Jet_*[nJet]``) in baskets of different sizes (so that
their entry boundaries differ), a second counter (``d[m]/D``), and a branch ``c[n]/F`` filled on
its own while ``n`` held other counts: its entries disagree with its counter, and readers that
follow the baskets' entry offsets (uproot) read what it holds. Needs ROOT
(``bash scripts/setup-bench.sh``); run once, the output is committed:

    .venv/bin/python tests/data/make_shared_counters.py

tests/test_shared_counters.py compares every branch with uproot.
"""

from __future__ import annotations

from pathlib import Path

import ROOT
from aclic import write_file

OUT = Path(__file__).with_name("shared-counters.root")
ENTRIES = 600

CODE = r"""
#include "TTree.h"

inline void write_counters(int entries) {
   TTree *tree = new TTree("t", "jagged branches sharing counters");
   Int_t n = 0, m = 0;
   Float_t a[8], b[8], c[8], e[8][2];
   Double_t d[8];
   tree->Branch("n", &n, "n/I");
   tree->Branch("a", a, "a[n]/F");
   tree->Branch("b", b, "b[n]/F");
   tree->Branch("e", e, "e[n][2]/F");
   tree->Branch("c", c, "c[n]/F");
   tree->Branch("m", &m, "m/I");
   tree->Branch("d", d, "d[m]/D");
   // Baskets of different sizes: each branch's baskets end at other entries.
   tree->GetBranch("a")->SetBasketSize(1000);
   tree->GetBranch("b")->SetBasketSize(1500);
   tree->GetBranch("e")->SetBasketSize(2200);
   tree->GetBranch("c")->SetBasketSize(1300);
   tree->GetBranch("d")->SetBasketSize(1700);
   for (int i = 0; i < entries; i++) {
      n = 5 - (i * 7) % 6;  // 5 first: the leaf's maximum, which c's counts stay under
      m = (i * 5) % 4;
      for (int j = 0; j < 8; j++) {
         a[j] = i + 0.25f * j;
         b[j] = -i - 0.5f * j;
         c[j] = 1000 + i + 0.125f * j;
         e[j][0] = i * 10 + j;
         e[j][1] = -(i * 10 + j);
         d[j] = i * 0.001 + j;
      }
      for (const char *name : {"n", "a", "b", "e", "m", "d"}) tree->GetBranch(name)->Fill();
      const Int_t counted = n;
      n = (i * 3) % 5;  // c is filled with another count than the entry's n
      tree->GetBranch("c")->Fill();
      n = counted;
   }
   tree->SetEntries(entries);
   tree->Write();
}
"""


def main() -> None:
    ROOT.gInterpreter.Declare(CODE)
    write_file(OUT, ROOT.write_counters, ENTRIES)


if __name__ == "__main__":
    main()
