"""Write split-fixed-dims.root with ROOT: fixed-size multi-dimensional members (``Float_t x[6][3]``,
``Int_t k[2][3][4]``) of the class of a split TClonesArray and of a split ``std::vector<Class>``,
as in experiments' event-summary files, and the same class as a split object outside any
collection, beside a one-dimensional member and a plain struct. uproot reads the collections'
members flattened (``var * 18 * float32``: their leaf titles name only the count) and the others
with their dimensions. Needs ROOT and a C++ compiler (``bash scripts/setup-bench.sh``); run once,
the output is committed:

    .venv/bin/python tests/data/make_split_fixed_dims.py

tests/test_split_fixed_dims.py compares every branch with uproot.
"""

from __future__ import annotations

from pathlib import Path

import ROOT
from aclic import compile_classes, write_file

OUT = Path(__file__).with_name("split-fixed-dims.root")
ENTRIES = 12

CLASSES = r"""
#include <vector>
#include "TObject.h"
#include "TClonesArray.h"
#include "TTree.h"

class Cell : public TObject {
public:
   Float_t x[6][3];
   Int_t k[2][3][4];
   Double_t d[5];
   Int_t n;
   Cell() : n(0) {}
   ClassDef(Cell, 1)
};

struct Plain {
   float m[2][3];
   int q;
};

inline void fill_cell(Cell &c, int i, int j) {
   for (int a = 0; a < 6; a++)
      for (int b = 0; b < 3; b++) c.x[a][b] = i * 100 + j * 10 + a * 3 + b + 0.5f;
   for (int a = 0; a < 2; a++)
      for (int b = 0; b < 3; b++)
         for (int e = 0; e < 4; e++) c.k[a][b][e] = i - j * 1000 + a * 12 + b * 4 + e;
   for (int a = 0; a < 5; a++) c.d[a] = i + 0.125 * a - j;
   c.n = i + j;
}

inline void write_dims(int entries) {
   TTree *tree = new TTree("cells", "fixed-size multi-dimensional members of split objects");
   auto *clones = new TClonesArray("Cell");
   auto *vec = new std::vector<Cell>();
   auto *one = new Cell();
   auto *plain = new Plain();
   tree->Branch("clones", &clones, 32000, 99);
   tree->Branch("vec", &vec, 32000, 99);
   tree->Branch("one", &one, 32000, 99);
   tree->Branch("plain", &plain, 32000, 99);
   for (int i = 0; i < entries; i++) {
      clones->Clear();
      vec->clear();
      for (int j = 0; j < i % 4; j++) {
         fill_cell(*(Cell *)clones->ConstructedAt(j), i, j);
         Cell c;
         fill_cell(c, i, j + 1);
         vec->push_back(c);
      }
      fill_cell(*one, i, 7);
      for (int a = 0; a < 2; a++)
         for (int b = 0; b < 3; b++) plain->m[a][b] = i + a * 3 + b;
      plain->q = i;
      tree->Fill();
   }
   tree->Write();
}

#ifdef __ROOTCLING__
#pragma link C++ class Cell+;
#pragma link C++ class Plain+;
#pragma link C++ class std::vector<Cell>+;
#pragma link C++ function write_dims;
#endif
"""


def main() -> None:
    compile_classes(CLASSES, "SplitFixedDims.h")
    write_file(OUT, ROOT.write_dims, ENTRIES)


if __name__ == "__main__":
    main()
