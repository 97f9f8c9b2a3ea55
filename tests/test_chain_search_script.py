"""experiments/chain_search.py on a tiny train step: both searches spend the
same evaluations from the best baseline, neither ends slower than it."""

import pytest

from experiments import chain_search


def test_the_table_has_both_searches_never_slower_than_the_start(tmp_path):
  out = tmp_path / "chains"
  assert chain_search.main(["--workloads", "rnnlm2", "--size", "tiny",
                            "--evaluations", "256", "--out", str(out)]) == 0
  text = (out / "README.md").read_text()
  assert chain_search.HEADER[0] in text
  row = next(line for line in text.splitlines()
             if line.startswith("| rnnlm2 |"))
  cells = [c.strip() for c in row.strip("|").split("|")]
  assert int(cells[2]) < int(cells[1])              # fewer chains than ops
  for gain in (cells[6], cells[9]):                 # never above the start
    assert gain == "+0.0%" or gain.startswith("-"), row


def test_bad_flags_are_one_line():
  with pytest.raises(SystemExit, match="--chain_share in"):
    chain_search.main(["--chain_share", "1.5"])
  with pytest.raises(SystemExit, match="^TopologyError: .*nope"):
    chain_search.main(["--topology", "nope"])
