"""Writes the ROOT-written test RNTuples beside this script (run once; the outputs are committed):

- ``rntuple-root-types.root``: the types uproot's writer cannot write (std::variant, std::optional,
  std::unique_ptr, std::bitset, std::pair, std::tuple, std::atomic, std::array, enums, user classes
  with inheritance, std::set/map, projected fields, Real32Trunc, Real32Quant and Real16 columns, a
  field added after writing began (deferred columns in the schema extension), a streamer field),
  in three cluster groups of several clusters; and the same values as JSON
  (``rntuple-root-types.json``, ROOT's own reading, for what uproot cannot read);
- ``rntuple-root-nanolike.root``: a NanoAOD-like RNTuple made by ROOT's RNTupleImporter from the
  first 600 entries of the lab's TTree (``../shared/testdata/nanolike-root6.40-zstd-4clusters.root``,
  which the tests compare it with), in clusters of about 200 kB.

Needs ROOT 6.40 (``bash scripts/setup-bench.sh``): ``.venv/bin/python tests/data/make_rntuple_root.py``
(``--reference``: only the JSON, from the committed file).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("CHERENKOV_SHARED", HERE.parents[2] / "shared"))
LAB_TREE = SHARED / "testdata" / "nanolike-root6.40-zstd-4clusters.root"

CODE = r"""
#include <ROOT/RNTupleModel.hxx>
#include <ROOT/RNTupleWriter.hxx>
#include <ROOT/RNTupleWriteOptions.hxx>
#include <ROOT/RNTupleReader.hxx>
#include <ROOT/RField.hxx>
#include <array>
#include <atomic>
#include <bitset>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

enum class Charge : int { kMinus = -1, kNeutral = 0, kPlus = 1 };
enum class Flavour : unsigned char { kLight = 0, kCharm = 4, kBottom = 5 };

struct Base {
   int id = 0;
   float weight = 0;
};
struct Particle : Base {
   double pt = 0;
   std::vector<int> hits;
   Charge charge = Charge::kNeutral;
};
struct Streamed {
   int a = 0;
   std::vector<double> v;
};

namespace gen {
using ROOT::RNTupleModel;
using ROOT::RNTupleWriter;

// Entries per cluster, clusters per cluster group.
const std::vector<std::vector<int>> kLayout = {{40, 25}, {7}, {30, 30, 18}};

// Projected fields: which field each projected (sub)field shows.
std::string MapProjPt(const std::string &)
{
   return "particle.pt";
}
std::string MapProjPts(const std::string &name)
{
   return name == "proj_pts" ? "particles" : "particles._0.pt";
}

void WriteTypes(const char *path)
{
   auto model = RNTupleModel::Create();
   auto i32 = model->MakeField<std::int32_t>("i32");
   auto u16 = model->MakeField<std::uint16_t>("u16");
   auto flag = model->MakeField<bool>("flag");
   auto str = model->MakeField<std::string>("str");
   auto variant = model->MakeField<std::variant<std::int32_t, float, std::string>>("variant");
   auto optional = model->MakeField<std::optional<double>>("optional");
   auto optvec = model->MakeField<std::optional<std::vector<float>>>("optvec");
   auto uptr = model->MakeField<std::unique_ptr<Base>>("uptr");
   auto bits = model->MakeField<std::bitset<70>>("bits");
   auto pair = model->MakeField<std::pair<std::int32_t, std::string>>("pair");
   auto tuple = model->MakeField<std::tuple<std::int8_t, double, std::vector<std::int16_t>>>("tuple");
   auto atomic = model->MakeField<std::atomic<std::int64_t>>("atomic");
   auto array = model->MakeField<std::array<float, 3>>("array");
   auto arrays = model->MakeField<std::vector<std::array<std::int32_t, 2>>>("arrays");
   auto charge = model->MakeField<Charge>("charge");
   auto flavour = model->MakeField<Flavour>("flavour");
   auto particle = model->MakeField<Particle>("particle");
   auto particles = model->MakeField<std::vector<Particle>>("particles");
   auto set = model->MakeField<std::set<std::int32_t>>("set");
   auto map = model->MakeField<std::map<std::string, float>>("map");
   auto nested = model->MakeField<std::vector<std::vector<double>>>("nested");
   auto rvec = model->MakeField<ROOT::RVec<float>>("rvec");

   auto trunc = std::make_unique<ROOT::RField<float>>("trunc");
   trunc->SetTruncated(14);
   model->AddField(std::move(trunc));
   auto quant = std::make_unique<ROOT::RField<float>>("quant");
   quant->SetQuantized(12, {-10., 10.});
   model->AddField(std::move(quant));
   auto half = std::make_unique<ROOT::RField<float>>("half");
   half->SetHalfPrecision();
   model->AddField(std::move(half));
   auto dtrunc = std::make_unique<ROOT::RField<double>>("dtrunc");
   dtrunc->SetTruncated(20);
   model->AddField(std::move(dtrunc));
   auto split32 = std::make_unique<ROOT::RField<std::int32_t>>("unsplit");
   split32->SetColumnRepresentatives({{ROOT::ENTupleColumnType::kInt32}});
   model->AddField(std::move(split32));
   model->AddField(std::make_unique<ROOT::RStreamerField>("streamed", "Streamed"));

   model->AddProjectedField(std::make_unique<ROOT::RField<double>>("proj_pt"), MapProjPt);
   model->AddProjectedField(std::make_unique<ROOT::RField<std::vector<double>>>("proj_pts"), MapProjPts);
   model->Freeze();

   ROOT::RNTupleWriteOptions options;
   options.SetCompression(505);
   auto writer = RNTupleWriter::Recreate(std::move(model), "types", path, options);
   auto entry = writer->GetModel().GetDefaultEntry().GetPtr<float>("trunc");
   auto quantv = writer->GetModel().GetDefaultEntry().GetPtr<float>("quant");
   auto halfv = writer->GetModel().GetDefaultEntry().GetPtr<float>("half");
   auto dtruncv = writer->GetModel().GetDefaultEntry().GetPtr<double>("dtrunc");
   auto unsplitv = writer->GetModel().GetDefaultEntry().GetPtr<std::int32_t>("unsplit");
   auto streamedv = writer->GetModel().GetDefaultEntry().GetPtr<Streamed>("streamed");
   std::shared_ptr<std::vector<std::int32_t>> late;  // added after the first cluster group

   int n = 0;
   for (std::size_t g = 0; g < kLayout.size(); ++g) {
      if (g == 1) {
         auto updater = writer->CreateModelUpdater();
         updater->BeginUpdate();
         updater->AddField(std::make_unique<ROOT::RField<std::vector<std::int32_t>>>("late"));
         updater->CommitUpdate();
         late = writer->GetModel().GetDefaultEntry().GetPtr<std::vector<std::int32_t>>("late");
      }
      for (std::size_t c = 0; c < kLayout[g].size(); ++c) {
         for (int k = 0; k < kLayout[g][c]; ++k, ++n) {
            *i32 = n * 7 - 300;
            *u16 = 65535 - n;
            *flag = n % 3 == 0;
            *str = std::string(n % 5, 'a' + n % 26);
            if (n % 3 == 0)
               *variant = std::int32_t(n);
            else if (n % 3 == 1)
               *variant = float(n) / 4;
            else
               *variant = std::string("v") + std::to_string(n);
            *optional = (n % 4 == 0) ? std::optional<double>() : std::optional<double>(n * 0.5);
            *optvec = (n % 5 == 0) ? std::optional<std::vector<float>>()
                                   : std::optional<std::vector<float>>(std::vector<float>(n % 3, n * 1.5f));
            if (n % 2 == 0) {
               auto b = std::make_unique<Base>();
               b->id = n;
               b->weight = n * 0.25f;
               *uptr = std::move(b);
            } else {
               uptr->reset();
            }
            bits->reset();
            for (int b = 0; b < 70; b += 1 + n % 7)
               bits->set(b);
            *pair = {n, "p" + std::to_string(n)};
            std::vector<std::int16_t> shorts;
            for (int s = 0; s < n % 4; ++s)
               shorts.push_back(std::int16_t(s - n));
            *tuple = {std::int8_t(n % 128 - 64), n * 0.125, shorts};
            atomic->store(std::int64_t(n) * 1000000007LL);
            *array = {float(n), float(-n), n * 0.5f};
            arrays->clear();
            for (int a = 0; a < n % 3; ++a)
               arrays->push_back({n, a});
            *charge = static_cast<Charge>(n % 3 - 1);
            *flavour = (n % 3 == 0) ? Flavour::kLight : (n % 3 == 1 ? Flavour::kCharm : Flavour::kBottom);
            particle->id = n;
            particle->weight = 1.f / (n + 1);
            particle->pt = n * 1.25;
            particle->hits.assign(n % 4, n);
            particle->charge = static_cast<Charge>(1 - n % 3);
            particles->clear();
            for (int p = 0; p < n % 3; ++p) {
               Particle q;
               q.id = 100 * n + p;
               q.weight = p * 0.5f;
               q.pt = n + p * 0.01;
               q.hits.assign(p, -p);
               q.charge = static_cast<Charge>(p % 3 - 1);
               particles->push_back(q);
            }
            set->clear();
            for (int s = 0; s < n % 4; ++s)
               set->insert((n * 31 + s * 17) % 50);
            map->clear();
            for (int s = 0; s < n % 3; ++s)
               (*map)["k" + std::to_string(s)] = n + s * 0.5f;
            nested->assign(n % 3, std::vector<double>(n % 2 + 1, n * 0.1));
            rvec->clear();
            for (int s = 0; s < n % 5; ++s)
               rvec->push_back(s * 1.5f);
            *entry = n * 0.3f - 7.7f;
            *quantv = -10.f + (n % 41) * 0.5f;
            *halfv = n * 0.1f - 3.f;
            *dtruncv = n * 0.3 - 7.7;
            *unsplitv = -n * 1000;
            streamedv->a = n;
            streamedv->v.assign(n % 3, n * 2.0);
            if (late) {
               late->assign(n % 4, n);
            }
            writer->Fill();
         }
         writer->CommitCluster();
      }
      writer->CommitCluster(true);  // closes the cluster group
   }
}
}  // namespace gen
"""


def main() -> int:
    import ROOT

    # Compiled by ACLiC (the JIT cannot emit every template RNTuple's fields need), which also
    # makes the dictionaries of the user classes.
    build = Path(tempfile.mkdtemp(prefix="make-rntuple-"))
    (build / "rntuple_types.C").write_text(CODE)
    ROOT.gSystem.SetBuildDir(str(build), True)
    if ROOT.gROOT.ProcessLine(f".L {build / 'rntuple_types.C'}+") != 0 or not hasattr(ROOT, "gen"):
        print("compiling the writer failed", file=sys.stderr)
        return 1
    if sys.argv[1:] == ["--reference"]:  # only the JSON, from the committed file
        write_reference(ROOT, HERE / "rntuple-root-types.root", HERE / "rntuple-root-types.json")
        return 0
    types = HERE / "rntuple-root-types.root"
    ROOT.gen.WriteTypes(str(types))
    print(f"wrote {types} ({types.stat().st_size} bytes)")
    write_reference(ROOT, types, HERE / "rntuple-root-types.json")
    if not LAB_TREE.exists():
        print(f"{LAB_TREE} is missing: no NanoAOD-like RNTuple", file=sys.stderr)
        return 1
    tree_slice = build / "nanolike-600.root"
    source = ROOT.TFile.Open(str(LAB_TREE))
    out = ROOT.TFile.Open(str(tree_slice), "RECREATE", "", 505)
    source.Get("Events").CopyTree("", "", 600).Write()
    out.Close()
    source.Close()
    nanolike = HERE / "rntuple-root-nanolike.root"
    nanolike.unlink(missing_ok=True)
    importer = ROOT.Experimental.RNTupleImporter.Create(str(tree_slice), "Events", str(nanolike))
    options = ROOT.RNTupleWriteOptions()
    options.SetCompression(505)
    options.SetApproxZippedClusterSize(200_000)  # several clusters in 600 entries
    options.SetPageBufferBudget(1 << 30)  # a page buffer per column of the ~1300
    importer.SetWriteOptions(options)
    importer.SetIsQuiet(True)
    importer.Import()
    print(f"wrote {nanolike} ({nanolike.stat().st_size} bytes)")
    return 0


def write_reference(ROOT, path: Path, out: Path) -> None:
    """Every top-level field's values as ROOT reads them, for fields uproot cannot read."""
    reader = ROOT.RNTupleReader.Open("types", str(path))
    names = [
        "variant",
        "optional",
        "uptr",
        "bits",
        "atomic",
        "charge",
        "flavour",
        "set",
        "map",
        "trunc",
        "quant",
        "half",
        "dtrunc",
        "unsplit",
        "proj_pt",
        "late",
    ]
    values: dict[str, list] = {n: [] for n in names}
    views = {n: reader.GetView[_cxx_type(reader, n)](n) for n in names}
    for i in range(reader.GetNEntries()):
        for n in names:
            values[n].append(_python(views[n](i), n))
    out.write_text(json.dumps(values, indent=0) + "\n")
    print(f"wrote {out}")


def _cxx_type(reader, name: str) -> str:
    return reader.GetDescriptor().GetFieldDescriptor(reader.GetDescriptor().FindFieldId(name)).GetTypeName()


def _python(value, name):
    import ROOT

    if name == "variant":
        index = value.index()
        return [int, float, str][index](ROOT.std.get[index](value))
    if name == "optional":
        return float(value.value()) if value.has_value() else None
    if name == "uptr":
        return None if not value else {"id": value.id, "weight": value.weight}
    if name == "bits":
        return [bool(value.test(b)) for b in range(value.size())]
    if name == "atomic":
        return int(value.load())
    if name == "charge":
        return int(value)
    if name == "flavour":  # cppyy reads the 1-byte enum with the 3 bytes after it
        return (ord(value) if isinstance(value, str) else int(value)) & 0xFF
    if name == "set":
        return [int(x) for x in value]
    if name == "map":
        return [[str(p.first), float(p.second)] for p in value]
    if name == "late":
        return [int(x) for x in value]
    if name == "unsplit":
        return int(value)
    return float(value)


if __name__ == "__main__":
    sys.exit(main())
