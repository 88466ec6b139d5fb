// Writes g4tools-ntuples.root with g4tools, the header-only writer Geant4's analysis manager
// (G4RootAnalysisManager) writes its ROOT files with: not through ROOT. Its layout is ROOT 3's
// (TTree 5, TBranch 8, 32-bit seeks), and its std::vector columns are TBranchElements of class
// version 1, which ROOT itself wrote only in early 2001.
//
// Two ntuples of the same columns, "column_wise" and "row_wise" (g4tools' two ways of filling
// baskets), each in several baskets per branch, zlib-compressed; the values are a function of
// the row number only, so tests can check them without a reader: see test_g4tools.py.
//
// Build against g4tools (Geant4's source/externals/g4tools/include, or the standalone g4tools
// repository) and zlib, then run in this folder:
//   g++ -std=c++17 -O1 -I<g4tools>/include make_g4tools_ntuples.cpp -lz -o /tmp/make_g4tools
//   /tmp/make_g4tools g4tools-ntuples.root

#include <tools/wroot/file>
#include <tools/wroot/ntuple>
#include <toolx/zlib>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

static const unsigned int ROWS = 2000;

static bool fill(tools::wroot::directory& dir, const std::string& name, bool row_wise) {
  // Owned by the directory once created: not deleted here.
  auto* ntuple = new tools::wroot::ntuple(dir, name, "g4tools " + name, row_wise);
  ntuple->set_basket_size(2000);  // several baskets per branch
  auto* row = ntuple->create_column<int>("row");
  auto* energy = ntuple->create_column<float>("energy");
  auto* x = ntuple->create_column<double>("x");
  auto* volume = ntuple->create_column_string("volume");
  std::vector<double> hits;
  ntuple->create_column_vector_ref<double>("hits", hits);
  std::vector<float> times;
  ntuple->create_column_vector_ref<float>("times", times);
  std::vector<int> ids;
  ntuple->create_column_vector_ref<int>("ids", ids);
  for (unsigned int i = 0; i < ROWS; i++) {
    hits.clear();
    times.clear();
    ids.clear();
    for (unsigned int k = 0; k < i % 6; k++) hits.push_back(i + 0.5 * k);
    for (unsigned int k = 0; k < i % 3; k++) times.push_back(0.25f * i - k);
    for (unsigned int k = 0; k < (i / 7) % 4; k++) ids.push_back(int(i) * 10 + int(k));
    if (!row->fill(int(i)) || !energy->fill(0.5f * i) || !x->fill(i * 0.125 - 100.0) ||
        !volume->fill("vol" + std::to_string(i % 11)) || !ntuple->add_row()) {
      return false;
    }
  }
  return true;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " OUTPUT.root" << std::endl;
    return EXIT_FAILURE;
  }
  tools::wroot::file file(std::cout, argv[1]);
  file.add_ziper('Z', toolx::compress_buffer);
  file.set_compression(1);
  if (!fill(file.dir(), "column_wise", false) || !fill(file.dir(), "row_wise", true)) {
    std::cerr << "filling an ntuple failed" << std::endl;
    return EXIT_FAILURE;
  }
  unsigned int written;
  if (!file.write(written)) {
    std::cerr << "writing the file failed" << std::endl;
    return EXIT_FAILURE;
  }
  file.close();
  return EXIT_SUCCESS;
}
