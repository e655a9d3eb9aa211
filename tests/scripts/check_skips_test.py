# scripts/check_skips.py on JUnit files shaped as `ctest --output-junit` writes them: a skip for a
# missing GPU passes, one for missing root, ../shared data or without a reason fails, and a run
# without skips passes.
import os, subprocess, sys, tempfile, unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                      "check_skips.py")


def case(name, status, output, skipped=False):
    mark = '<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>' if skipped else ""
    return (f'<testcase name="{name}" classname="{name}" time="0.1" status="{status}">{mark}'
            f"<system-out>{output}</system-out></testcase>")


def junit(*cases):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="x" tests="1">'
            + "".join(cases) + "</testsuite>")


class CheckSkipsTest(unittest.TestCase):
    def run_check(self, text, *args):
        with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
            f.write(text)
        try:
            return subprocess.run([sys.executable, SCRIPT, f.name, *args], capture_output=True,
                                  text=True)
        finally:
            os.unlink(f.name)

    def test_gpu_skips_are_accepted(self):
        r = self.run_check(junit(
            case("kernels_test.Norm.Rows", "notrun", "a.cc:3: Skipped\nno CUDA device\n", True),
            case("base_test.Status.Ok", "run", "")))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_skips_ci_should_satisfy_fail_naming_the_case(self):
        for reason in ("needs root (network namespaces)",
                       "real tokenizer not found at ../shared/data/tokenizers/qwen3"):
            r = self.run_check(junit(case("sim_test.Sim.Creates", "notrun",
                                          f"s.cc:9: Skipped\n{reason}\n[  SKIPPED ] Sim.Creates\n",
                                          True)))
            self.assertEqual(r.returncode, 1, reason)
            self.assertIn(f"sim_test.Sim.Creates was skipped: {reason}", r.stderr)

    def test_a_skip_by_exit_status_is_judged_by_its_last_line(self):
        r = self.run_check(junit(case("openai_client_test", "notrun",
                                      "starting\nskipped: the openai package is not installed\n",
                                      True)))
        self.assertEqual(r.returncode, 1)
        self.assertIn("the openai package is not installed", r.stderr)

    def test_allow_accepts_one_more_reason(self):
        text = junit(case("sim_test.Sim.Creates", "notrun",
                          "s.cc:9: Skipped\nneeds root (network namespaces)\n", True))
        self.assertEqual(self.run_check(text, "--allow", "needs root").returncode, 0)

    def test_unreadable_file_is_exit_2(self):
        self.assertEqual(self.run_check("<not xml").returncode, 2)


if __name__ == "__main__":
    unittest.main()
