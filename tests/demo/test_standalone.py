import subprocess
import sys
from pathlib import Path

PLATFORM = Path(__file__).resolve().parents[2] / "platform"


def test_the_domain_and_personas_run_on_the_standard_library_alone():
    # -S leaves site-packages (Django, ...) off the path, and only platform/ is on it, so
    # importing anything but the standard library and demo itself fails here.
    script = (
        "import random, sys, demo.domain as d, demo.domain.generate as g, demo.personas as p\n"
        "rng = random.Random(0); prompt = g.sample_prompt(rng)\n"
        "p.feedback_for(p.Persona.load('easygoing'), d.render_prompt(prompt), g.sample_response(rng, prompt), rng)\n"
        "print(sorted({name.split('.')[0] for name in sys.modules} - set(sys.stdlib_module_names)))\n"
    )
    result = subprocess.run([sys.executable, "-S", "-c", script], cwd=PLATFORM, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['__main__', 'demo']"
