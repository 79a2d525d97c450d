"""A user's models.py, tasks.py, dynamics.py or analysis.py in the working directory does not
replace ad.models etc.: the library's packages are installed only inside attndyn."""
import subprocess
import sys
import textwrap

PACKAGES = ("tasks", "models", "dynamics", "analysis")


def test_files_in_the_working_directory_do_not_shadow_the_packages(tmp_path):
  for name in PACKAGES:
    message = f"{name}.py of the working directory was imported"
    (tmp_path / f"{name}.py").write_text(f"raise RuntimeError({message!r})\n")
  code = textwrap.dedent("""
      import attndyn as ad
      assert ad.models.LuModelConfig and ad.tasks.TopicTaskConfig
      assert callable(ad.dynamics.make_train) and callable(ad.analysis.load)
      for name in ("tasks", "models", "dynamics", "analysis"):
          module = getattr(ad, name)
          assert module.__name__ == "attndyn." + name, module.__name__
      print("ok")
  """)
  out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
  assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
