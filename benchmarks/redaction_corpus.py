"""A planted corpus for measuring ``tenants.redaction``: secrets and PII embedded in
code-like text, plus hard negatives that look like them but must survive.

Everything is drawn from a seeded ``random.Random``, so a seed always yields the
same corpus. Each ``Sample`` knows the exact spans it planted; negatives plant
none. Values follow the real formats (vendor prefixes, lengths, alphabets,
phone number plans) rather than the detector's regexes, and every positive is
wrapped in one of several formats (Python, JS, Go, YAML, .env, shell, JSON,
logs, comments, prose) with varied names, quoting and surrounding code.

Long because it is mostly data: the formats, the wrappers and the hard negatives are tables,
each row one case the redaction must get right.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Planted", "Sample", "planted_corpus"]

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
PW_SYMBOLS = "!@#$%^&*-_+=.?"


@dataclass(frozen=True)
class Planted:
    kind: str
    start: int
    end: int


@dataclass(frozen=True)
class Sample:
    text: str
    planted: tuple[Planted, ...]
    label: str  # what the template was, e.g. "password/yaml" or "negative/uuid"

    @property
    def is_negative(self) -> bool:
        return not self.planted


@dataclass
class _Builder:
    parts: list[str] = field(default_factory=list)
    planted: list[Planted] = field(default_factory=list)
    length: int = 0

    def add(self, text: str) -> _Builder:
        self.parts.append(text)
        self.length += len(text)
        return self

    def plant(self, kind: str, value: str) -> _Builder:
        self.planted.append(Planted(kind, self.length, self.length + len(value)))
        return self.add(value)

    def sample(self, label: str) -> Sample:
        return Sample("".join(self.parts), tuple(self.planted), label)


def _s(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


# --------------------------------------------------------------------------- #
# Benign surroundings, shared by positives and negatives                       #
# --------------------------------------------------------------------------- #

_BENIGN_LINES = (
    "import os",
    "import logging",
    "from pathlib import Path",
    "logger = logging.getLogger(__name__)",
    "def sum_list(xs: list[int]) -> int:\n    return sum(xs)",
    "for i in range(10):\n    total += i * i",
    "result = [n * n for n in numbers if n % 2 == 0]",
    "first, last = xs[0], xs[-1]",
    "const retries = 3;",
    "export default function App() { return null; }",
    "# TODO: handle timeouts",
    "// see README for setup",
    "if __name__ == \"__main__\":\n    main()",
    "    timeout: 30",
    "  replicas: 2",
    "echo \"deploying...\"",
    "set -euo pipefail",
    "2024-03-11 09:14:02,511 INFO worker started pid=4121",
    "assert fib(10) == 55",
    "return {\"status\": \"ok\", \"count\": len(items)}",
    "matrix = [[1, 2, 3], [4, 5, 6]]",
    "DEBUG = False",
    "app.listen(3000);",
    "func main() {",
    "}",
    "SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '7 days';",
)
_NAMES = ("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy",
          "mallory", "nia", "oscar", "peggy", "rupert", "sybil", "trent", "victor", "wendy", "yusuf",
          "chen", "priya", "lukas", "sofia", "mateo", "aiko", "olu", "fatima", "noah", "ines")
_SURNAMES = ("smith", "garcia", "nguyen", "müller", "kowalski", "rossi", "tanaka", "okafor", "silva",
             "johansson", "dubois", "patel", "kim", "cohen", "novak", "schmidt", "lopez", "singh")
_WORDS = ("river", "falcon", "copper", "winter", "maple", "orbit", "velvet", "harbor", "cactus",
          "lantern", "meadow", "quartz", "summer", "tiger", "puzzle", "rocket", "violet", "shadow")
_DOMAINS = ("gmail.com", "outlook.com", "acme-corp.com", "mail.hosting.net", "protonmail.ch",
            "company.co.uk", "uni-heidelberg.de", "yahoo.co.jp", "startup.io", "fastmail.fm",
            "consulting.com.br", "agency.fr", "hospital.org.au", "research.ac.in")
_HOSTS = ("db.internal", "prod-db-1.cluster-abc123.eu-west-1.rds.amazonaws.com", "10.0.3.17",
          "cache.svc.local", "mongo0.example.net", "rabbit.prod", "registry.corp.net")


def _wrap(rng: random.Random, b: _Builder, body: Callable[[_Builder], None]) -> None:
    """Surround a planted item with 0-2 benign lines on each side."""
    for _ in range(rng.randrange(3)):
        b.add(rng.choice(_BENIGN_LINES) + "\n")
    body(b)
    for _ in range(rng.randrange(3)):
        b.add("\n" + rng.choice(_BENIGN_LINES))


# --------------------------------------------------------------------------- #
# Secret values in their real formats                                          #
# --------------------------------------------------------------------------- #

def _password(rng: random.Random) -> str:
    style = rng.randrange(6)
    if style == 0:
        return _s(rng, ALNUM, rng.randint(8, 14)) + _s(rng, PW_SYMBOLS, 2) + _s(rng, ALNUM, 3)
    if style == 1:
        return rng.choice(_WORDS).capitalize() + str(rng.randint(1990, 2030)) + rng.choice("!#$*?")
    if style == 2:
        return "-".join(rng.sample(_WORDS, 3)) + "-" + str(rng.randint(10, 99))
    if style == 3:
        return _s(rng, HEX, rng.choice((32, 64)))
    if style == 4:
        return _s(rng, B64URL, 43)
    # Random generator output: may start with a symbol.
    return _s(rng, ALNUM + PW_SYMBOLS, rng.randint(12, 20))


def _jwt(rng: random.Random) -> str:
    def enc(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    header = enc({"alg": rng.choice(["HS256", "RS256"]), "typ": "JWT"})
    payload = enc({"sub": str(rng.randint(1, 10**6)), "name": rng.choice(_NAMES), "iat": rng.randint(1_600_000_000, 1_800_000_000)})
    return f"{header}.{payload}.{_s(rng, B64URL, 43)}"


def _pem(rng: random.Random) -> str:
    label = rng.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY",
                        "ENCRYPTED PRIVATE KEY", "DSA PRIVATE KEY"])
    lines = [_s(rng, B64, 64) for _ in range(rng.randint(3, 12))]
    lines.append(_s(rng, B64, rng.randint(8, 60)) + rng.choice(["", "=", "=="]))
    return f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----"


_API_KEYS: tuple[tuple[str, Callable[[random.Random], str]], ...] = (
    ("aws_access_key_id", lambda r: r.choice(["AKIA", "ASIA"]) + _s(r, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)),
    ("stripe_secret_key", lambda r: r.choice(["sk_live_", "rk_live_"]) + _s(r, ALNUM, r.choice((24, 34, 99)))),
    ("stripe_test_key", lambda r: "sk_test_" + _s(r, ALNUM, r.choice((24, 99)))),
    ("sendgrid_api_key", lambda r: "SG." + _s(r, B64URL, 22) + "." + _s(r, B64URL, 43)),
    ("openai_api_key", lambda r: "sk-" + _s(r, ALNUM, 20) + "T3BlbkFJ" + _s(r, ALNUM, 20)),
    ("openai_project_key", lambda r: "sk-proj-" + _s(r, B64URL, 74) + "T3BlbkFJ" + _s(r, B64URL, 74)),
    ("google_api_key", lambda r: "AIza" + _s(r, B64URL, 35)),
    ("anthropic_api_key", lambda r: "sk-ant-api03-" + _s(r, B64URL, 93) + "AA"),
    ("mailchimp_api_key", lambda r: _s(r, HEX, 32) + "-us" + str(r.randint(1, 21))),
    ("twilio_api_key", lambda r: "SK" + _s(r, HEX, 32)),
    ("square_secret", lambda r: "sq0csp-" + _s(r, B64URL, 43)),
)
_TOKENS: tuple[tuple[str, Callable[[random.Random], str]], ...] = (
    ("github_token", lambda r: r.choice(["ghp_", "gho_", "ghs_", "ghu_"]) + _s(r, ALNUM, 36)),
    ("github_pat", lambda r: "github_pat_" + _s(r, ALNUM, 22) + "_" + _s(r, ALNUM, 59)),
    ("gitlab_token", lambda r: "glpat-" + _s(r, B64URL, 20)),
    ("slack_bot_token", lambda r: f"xoxb-{r.randint(10**10, 10**12)}-{r.randint(10**10, 10**12)}-{_s(r, ALNUM, 24)}"),
    ("jwt", _jwt),
    ("discord_bot_token", lambda r: r.choice("MNO") + _s(r, B64URL, 23) + "." + _s(r, B64URL, 6) + "." + _s(r, B64URL, 27)),
    ("telegram_bot_token", lambda r: f"{r.randint(10**8, 10**10 - 1)}:AA{_s(r, B64URL, 33)}"),
    ("huggingface_token", lambda r: "hf_" + _s(r, string.ascii_letters, 34)),
    ("npm_token", lambda r: "npm_" + _s(r, ALNUM, 36)),
    ("pypi_token", lambda r: "pypi-AgEIcHlwaS5vcmc" + _s(r, B64URL, 120)),
)


def _secret_in_context(rng: random.Random, kind: str, name: str, value: str) -> Sample:
    """A vendor key/token in one of many code and config shapes."""
    var = rng.choice([name.upper(), name, name.replace("_", "-"), name.split("_")[0].upper() + "_KEY"])
    if kind == "token" and rng.random() < 0.5:
        var = rng.choice([name.upper(), "ACCESS_TOKEN", "authToken", "bot_token", "CI_TOKEN"])
    shape = rng.randrange(15)
    b = _Builder()

    def body(b: _Builder) -> None:
        q = rng.choice(['"', "'"])
        if shape == 0:
            b.add(f"{var} = {q}").plant(kind, value).add(q)
        elif shape == 1:
            b.add(f"export {var.upper()}=").plant(kind, value)
        elif shape == 2:
            b.add(f"const {var.lower().replace('-', '_')} = {q}").plant(kind, value).add(f"{q};")
        elif shape == 3:
            b.add(f"  {var.lower()}: ").plant(kind, value)
        elif shape == 4:
            b.add(f'{{"{var.lower()}": "').plant(kind, value).add('", "region": "us-east-1"}')
        elif shape == 5:
            b.add(f"client = Client({q}").plant(kind, value).add(f"{q}, timeout=30)")
        elif shape == 6:
            b.add("curl -s -H \"Authorization: Bearer ").plant(kind, value).add("\" https://api.service.com/v1/me")
        elif shape == 7:
            b.add("# temporary, remove before merge: ").plant(kind, value)
        elif shape == 8:
            b.add("2024-05-02T10:11:12Z DEBUG auth header token=").plant(kind, value).add(" status=401")
        elif shape == 9:
            b.add(f"os.environ.setdefault({q}{var.upper()}{q}, {q}").plant(kind, value).add(f"{q})")
        elif shape == 10:
            b.add(f"{var.upper()}: ").plant(kind, value).add("  # rotated 2024-01")
        elif shape == 12:
            b.add(f"GET /v1/search?q=test&{var.lower()}=").plant(kind, value).add("&page=2 HTTP/1.1")
        elif shape == 13:
            b.add(f"process.env.{var.upper()} ??= `").plant(kind, value).add("`;")
        elif shape == 14:
            b.add(f"{var.upper()}: ").plant(kind, value).add("\n  # do not commit")
        else:  # shape == 11
            b.add(f'    env:\n      - name: {var.upper()}\n        value: "').plant(kind, value).add('"')

    _wrap(rng, b, body)
    return b.sample(f"{kind}/{name}/{shape}")


def _aws_secret_sample(rng: random.Random) -> Sample:
    value = _s(rng, B64, 40)
    b = _Builder()
    if rng.random() < 0.5:
        key_id = "AKIA" + _s(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
        b.add("[default]\naws_access_key_id = ").plant("api_key", key_id)
        b.add("\naws_secret_access_key = ").plant("api_key", value)
    else:
        b.add("s3 = boto3.client(\"s3\", aws_secret_access_key=\"").plant("api_key", value).add("\")")
    return b.sample("api_key/aws_secret_access_key")


def _private_key_sample(rng: random.Random) -> Sample:
    pem = _pem(rng)
    b = _Builder()
    shape = rng.randrange(4)
    if shape == 0:
        b.add("$ cat ~/.ssh/id_deploy\n").plant("private_key", pem).add("\n$ chmod 600 ~/.ssh/id_deploy")
    elif shape == 1:
        escaped = pem.replace("\n", "\\n")
        b.add('{"type": "service_account", "private_key": "').plant("private_key", escaped)
        b.add('\\n", "client_email": "').plant("email", "svc@project.iam.gserviceaccount.com").add('"}')
    elif shape == 2:
        indented = pem.replace("\n", "\n    ")
        b.add("tls:\n  key: |\n    ").plant("private_key", indented).add("\n  cert: ./cert.pem")
    else:
        b.add('KEY = """').plant("private_key", pem).add('"""\nsigner = load_pem(KEY)')
    return b.sample(f"private_key/{shape}")


def _password_sample(rng: random.Random) -> Sample:
    pw = _password(rng)
    name = rng.choice(["password", "PASSWORD", "db_password", "DB_PASSWORD", "POSTGRES_PASSWORD",
                       "admin_pass", "passwd", "SMTP_PASSWORD", "secret_key", "SECRET_KEY",
                       "client_secret", "pwd", "MYSQL_ROOT_PASSWORD", "redisPassword", "api_secret"])
    shape = rng.randrange(22)
    b = _Builder()

    def body(b: _Builder) -> None:
        q = rng.choice(['"', "'"])
        user = rng.choice(_NAMES)
        if shape == 0:
            b.add(f"{name} = {q}").plant("password", pw).add(q)
        elif shape == 1:
            b.add(f"conn = psycopg.connect(host={q}{rng.choice(_HOSTS)}{q}, user={q}app{q}, password={q}")
            b.plant("password", pw).add(f"{q})")
        elif shape == 2:
            b.add(f"database:\n  user: app\n  {name.lower()}: ").plant("password", pw).add("\n  port: 5432")
        elif shape == 3:
            b.add(f"{name.upper()}=").plant("password", pw)
        elif shape == 4:
            b.add(f'{{"username": "{rng.choice(_NAMES)}", "{name}": "').plant("password", pw).add('"}')
        elif shape == 5:
            b.add(f'String {name} = "').plant("password", pw).add('";')
        elif shape == 6:
            b.add(f'{name} := "').plant("password", pw).add('"')
        elif shape == 7:
            b.add(f"export {name.upper()}={q}").plant("password", pw).add(f"{q}")
        elif shape == 8:
            b.add(f"[mysql]\nhost = {rng.choice(_HOSTS)}\n{name.lower()} = ").plant("password", pw)
        elif shape == 9:
            b.add(f"spring.datasource.{name.lower()}=").plant("password", pw)
        elif shape == 10:
            b.add(f"def connect(host: str, {name.lower()}: str = {q}").plant("password", pw).add(f"{q}) -> Conn:")
        elif shape == 11:
            b.add(f"settings = {{\n    '{name}': '").plant("password", pw).add("',\n}")
        elif shape == 12:
            b.add(f"services:\n  db:\n    environment:\n      {name.upper()}: ").plant("password", pw)
        elif shape == 14:
            b.add(f"<server>\n  <id>nexus</id>\n  <username>{user}</username>\n  <password>").plant("password", pw)
            b.add("</password>\n</server>")
        elif shape == 15:
            b.add(f"$config = [\n    '{name.lower()}' => '").plant("password", pw).add("',\n];")
        elif shape == 16:
            b.add(f'"ConnectionStrings": {{"Default": "Server=sql01;Database=app;User Id={user};Password=')
            b.plant("password", pw).add(';"}')
        elif shape == 17:
            b.add(f"kubectl create secret generic db --from-literal=username={user} --from-literal=password=")
            b.plant("password", pw)
        elif shape == 18:
            b.add(f"docker run -d -e {name.upper()}=").plant("password", pw).add(" -p 5432:5432 postgres:16")
        elif shape == 19:
            b.add(f"curl -u {user}:").plant("password", pw).add(" https://ci.corp.net/api/json")
        elif shape == 20:
            b.add("machine api.heroku.com\n  login ").plant("email", f"{user}@{rng.choice(_DOMAINS)}")
            b.add("\n  password ").plant("password", pw)
        elif shape == 21:
            b.add(f"const config = {{ host: 'db', {name}: {q}").plant("password", pw).add(f"{q} }};")
        else:  # shape == 13
            b.add(f"mysql -h {rng.choice(_HOSTS)} -u root --{name.lower().replace('_', '-')}=").plant("password", pw)

    _wrap(rng, b, body)
    # Hosts like 10.0.3.17 planted in shapes 1/8/13 are also IPs: plant them too.
    return _mark_ips(b.sample(f"password/{shape}"))


def _url_credentials_sample(rng: random.Random) -> Sample:
    pw = _s(rng, ALNUM, rng.randint(10, 24)) + rng.choice(["", "-", "_", "~", ".", "%21", "%40"]) + _s(rng, ALNUM, 4)
    user = rng.choice(["admin", "app", "postgres", rng.choice(_NAMES), "svc_reader", "root"])
    scheme = rng.choice(["postgres", "postgresql", "mysql", "mongodb+srv", "redis", "amqp", "https", "ftp", "smtp"])
    host = rng.choice(["db.internal", "cluster0.x1y2z.mongodb.net", "cache.svc.local", "mq.prod", "git.corp.net"])
    shape = rng.randrange(5)
    b = _Builder()

    def body(b: _Builder) -> None:
        prefix = f"{scheme}://{user}:"
        suffix = f"@{host}:{rng.randint(1000, 9999)}/{rng.choice(['app', 'main', 'repo.git', '0'])}"
        if shape == 0:
            b.add(f"DATABASE_URL={prefix}").plant("url_credentials", pw).add(suffix)
        elif shape == 1:
            b.add(f'engine = create_engine("{prefix}').plant("url_credentials", pw).add(f'{suffix}")')
        elif shape == 2:
            b.add(f"  url: {prefix}").plant("url_credentials", pw).add(suffix)
        elif shape == 3:
            b.add(f"git clone {prefix}").plant("url_credentials", pw).add(suffix)
        else:  # shape == 4
            b.add(f"ERROR could not connect to {prefix}").plant("url_credentials", pw).add(f"{suffix}: timeout")

    _wrap(rng, b, body)
    return b.sample(f"url_credentials/{shape}")


# --------------------------------------------------------------------------- #
# PII values                                                                   #
# --------------------------------------------------------------------------- #

def _email(rng: random.Random) -> str:
    first, last = rng.choice(_NAMES), rng.choice(_SURNAMES).replace("ü", "ue")
    local = rng.choice([f"{first}.{last}", f"{first}{rng.randint(1, 99)}", f"{first[0]}{last}",
                        f"{first}+{rng.choice(['test', 'ci', 'news'])}", f"{first}_{last}"])
    return f"{local}@{rng.choice(_DOMAINS)}"


def _email_sample(rng: random.Random) -> Sample:
    email = _email(rng)
    shape = rng.randrange(12)
    b = _Builder()

    def body(b: _Builder) -> None:
        name = email.split("@")[0].split(".")[0].capitalize()
        if shape == 0:
            b.add(f"Author: {name} <").plant("email", email).add(">\nDate:   Mon Mar 4 10:22:01 2024 +0100")
        elif shape == 1:
            b.add("# Maintainer: ").plant("email", email)
        elif shape == 2:
            b.add('user = User.objects.create(username="x", email="').plant("email", email).add('")')
        elif shape == 3:
            b.add("2024-02-29 23:59:59 WARN login failed for ").plant("email", email).add(" from 3 attempts")
        elif shape == 4:
            b.add('<a href="mailto:').plant("email", email).add('">contact us</a>')
        elif shape == 5:
            b.add(f"id,name,email\n{rng.randint(1, 999)},{name},").plant("email", email)
        elif shape == 6:
            b.add("Please reach out to ").plant("email", email).add(" if the build breaks.")
        elif shape == 7:
            b.add("  owners:\n    - ").plant("email", email)
        elif shape == 9:
            b.add(f"/**\n * @author {name} <").plant("email", email.upper() if rng.random() < 0.3 else email).add(">\n */")
        elif shape == 10:
            b.add('send_mail("Welcome", body, "').plant("email", "noreply@startup.io")
            b.add('", ["').plant("email", email).add('"])')
        elif shape == 11:
            b.add(f"Signed-off-by: {name} <").plant("email", email).add(">")
        else:  # shape == 8
            b.add("git config --global user.email \"").plant("email", email).add('"')

    _wrap(rng, b, body)
    return b.sample(f"email/{shape}")


# (country code, national patterns); "N" = digit 2-9, "X" = any digit.
_PHONE_PLANS = (
    ("1", ["(NXX) NXX-XXXX", "NXX-NXX-XXXX", "NXX.NXX.XXXX", "NXX NXX XXXX"]),
    ("44", ["20 NXXX XXXX", "7NXX XXXXXX", "161 NXX XXXX"]),
    ("49", ["30 NXXXXXXX", "151 NXXXXXXX", "89 NXXXXXX"]),
    ("33", ["6 NX XX XX XX", "1 NX XX XX XX"]),
    ("81", ["90-NXXX-XXXX", "3-NXXX-XXXX"]),
    ("91", ["98NXX XXXXX", "22 NXXX XXXX"]),
    ("55", ["11 9NXXX-XXXX", "21 NXXX-XXXX"]),
    ("61", ["4NX XXX XXX", "2 NXXX XXXX"]),
    ("34", ["6NX XXX XXX", "91 NXX XX XX"]),
    ("31", ["6 NXXXXXXX", "20 NXX XXXX"]),
    ("86", ["138 NXXX XXXX"]),
    ("234", ["803 NXX XXXX"]),
)


def _phone(rng: random.Random) -> tuple[str, str]:
    """A phone number in the country's real plan, as (international, E.164)."""
    import phonenumbers  # only to keep the planted numbers real (valid in libphonenumber metadata)

    while True:
        cc, patterns = rng.choice(_PHONE_PLANS)
        national = "".join(
            rng.choice("23456789") if c == "N" else rng.choice(string.digits) if c == "X" else c
            for c in rng.choice(patterns)
        )
        number = f"+{cc} {national}"
        if phonenumbers.is_valid_number(phonenumbers.parse(number)):
            return number, "+" + cc + "".join(c for c in national if c.isdigit())


def _phone_sample(rng: random.Random) -> Sample:
    pretty, e164 = _phone(rng)
    number = rng.choice([pretty, pretty, e164])
    if pretty.startswith("+1 ") and rng.random() < 0.4:
        number = pretty[3:]  # US national format, as written in the US
    shape = rng.randrange(10)
    b = _Builder()

    def body(b: _Builder) -> None:
        if shape == 0:
            b.add('SUPPORT_PHONE = "').plant("phone", number).add('"')
        elif shape == 1:
            b.add("# on-call: ").plant("phone", number).add(f" ({rng.choice(_NAMES)})")
        elif shape == 2:
            b.add('{"name": "' + rng.choice(_NAMES) + '", "phone": "').plant("phone", number).add('"}')
        elif shape == 3:
            b.add("Call me at ").plant("phone", number).add(" after 6pm.")
        elif shape == 4:
            b.add("2024-06-01 08:00:00 INFO sms sent to ").plant("phone", number).add(" status=delivered")
        elif shape == 5:
            b.add('<a href="tel:').plant("phone", number).add('">call</a>')
        elif shape == 7:
            b.add("Tel.: ").plant("phone", number.replace(" ", "-", 1) if number.startswith("+") else number)
        elif shape == 8:
            b.add("| " + rng.choice(_NAMES).capitalize() + " | ").plant("phone", number).add(" | on call |")
        elif shape == 9:
            b.add("twilio.messages.create(to=\"").plant("phone", number).add('", from_="')
            b.plant("phone", "+15005550006").add('", body=msg)')
        else:  # shape == 6
            b.add("  contact_phone: ").plant("phone", number)

    _wrap(rng, b, body)
    return b.sample(f"phone/{shape}")


def _ipv4(rng: random.Random, private: bool) -> str:
    import ipaddress

    while True:
        if private:
            addr = rng.choice([f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
                               f"192.168.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
                               f"172.{rng.randint(16, 31)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"])
        else:
            addr = ".".join(str(rng.randint(1, 254)) for _ in range(4))
        address = ipaddress.ip_address(addr)
        if private or (address.is_global and not address.is_multicast):  # a host, not a group
            return addr


def _ipv6(rng: random.Random) -> str:
    import ipaddress

    groups = [f"{rng.randint(0x2001, 0x2a0f):x}"] + [f"{rng.randint(0, 0xFFFF):x}" for _ in range(7)]
    if rng.random() < 0.5:
        groups[3:6] = ["0", "0", "0"]
    return str(ipaddress.IPv6Address(":".join(groups)))  # canonical, compressed form


def _ip_sample(rng: random.Random) -> Sample:
    ip = rng.choice([_ipv4(rng, False), _ipv4(rng, False), _ipv4(rng, True), _ipv6(rng)])
    shape = rng.randrange(11)
    b = _Builder()

    def body(b: _Builder) -> None:
        if shape == 0:
            b.plant("ip_address", ip).add(' - - [12/Mar/2024:10:01:02 +0000] "GET /api/v1/users HTTP/1.1" 200 512')
        elif shape == 1:
            b.add("ALLOWED_HOSTS = [\"localhost\", \"").plant("ip_address", ip).add("\"]")
        elif shape == 2:
            b.add("ssh -i ~/.ssh/id_ed25519 ubuntu@").plant("ip_address", ip)
        elif shape == 3:
            b.add("  host: ").plant("ip_address", ip).add("\n  port: 6379")
        elif shape == 4:
            b.add("Failed password for invalid user admin from ").plant("ip_address", ip).add(" port 52144 ssh2")
        elif shape == 5:
            host = ip if ":" not in ip else f"[{ip}]"  # IPv6 hosts are bracketed in URLs
            b.add('upstream = "http://' + host[: host.index(ip)]).plant("ip_address", ip)
            b.add(host[host.index(ip) + len(ip) :] + ':8080/health"')
        elif shape == 6:
            b.add("X-Forwarded-For: ").plant("ip_address", ip)
        elif shape == 8:
            b.add("inet ").plant("ip_address", ip).add("/24 brd + scope global eth0" if ":" not in ip else "/64 scope global")
        elif shape == 9:
            b.add('{"client_ip": "').plant("ip_address", ip).add('", "status": 403}')
        elif shape == 10:
            b.add("nc -zv ").plant("ip_address", ip).add(" 5432")
        else:  # shape == 7
            b.add("# blocked after abuse report: ").plant("ip_address", ip)

    _wrap(rng, b, body)
    return b.sample(f"ip_address/{shape}")


def _mark_ips(sample: Sample) -> Sample:
    """Plant the private IP hosts some templates use, so they count as planted, not false positives."""
    planted = list(sample.planted)
    pos = sample.text.find("10.0.3.17")
    while pos != -1:
        planted.append(Planted("ip_address", pos, pos + len("10.0.3.17")))
        pos = sample.text.find("10.0.3.17", pos + 1)
    return Sample(sample.text, tuple(sorted(planted, key=lambda p: p.start)), sample.label)


def _signature_sample(rng: random.Random) -> Sample:
    """Several PII items at once, as in a pasted email signature."""
    b = _Builder()
    name = f"{rng.choice(_NAMES).capitalize()} {rng.choice(_SURNAMES).capitalize()}"
    b.add(f"--\n{name}\nStaff Engineer\nemail: ").plant("email", _email(rng)).add("\nmobile: ")
    b.plant("phone", _phone(rng)[0]).add("\nvpn gateway: ").plant("ip_address", _ipv4(rng, False))
    return b.sample("pii/signature")


# --------------------------------------------------------------------------- #
# Hard negatives                                                               #
# --------------------------------------------------------------------------- #

def _uuid(rng: random.Random) -> str:
    h = _s(rng, HEX, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{rng.choice('89ab')}{h[17:20]}-{h[20:]}"


def _version(rng: random.Random) -> str:
    return ".".join(str(rng.randint(0, 30)) for _ in range(rng.choice((3, 3, 4))))


_NEGATIVE_TEMPLATES: tuple[tuple[str, Callable[[random.Random], str]], ...] = (
    ("git_sha", lambda r: f"commit {_s(r, HEX, 40)}\nMerge: {_s(r, HEX, 7)} {_s(r, HEX, 7)}"),
    ("git_sha_short", lambda r: f"{_s(r, HEX, 7)} fix: handle empty list in sum_list (#{r.randint(10, 9999)})"),
    ("sha256", lambda r: f"sha256:{_s(r, HEX, 64)}  dist/app-{_version(r)}.tar.gz"),
    ("lockfile", lambda r: f'      "integrity": "sha512-{_s(r, B64, 86)}=="'),
    ("md5", lambda r: f'etag = "{_s(r, HEX, 32)}"'),
    ("uuid", lambda r: f'request_id = "{_uuid(r)}"'),
    ("uuid_log", lambda r: f"2024-01-15T12:30:45.123Z INFO job {_uuid(r)} finished in {r.randint(1, 9999)}ms"),
    ("uuid_json", lambda r: f'{{"id": "{_uuid(r)}", "tenant_id": "{_uuid(r)}"}}'),
    ("pip_pin", lambda r: f"{r.choice(['requests', 'django', 'numpy', 'urllib3'])}=={_version(r)}"),
    ("version_var", lambda r: f'__version__ = "{_version(r)}"'),
    ("version_v", lambda r: f"released v{_version(r)} on 2024-02-0{r.randint(1, 9)}"),
    ("version_words", lambda r: f"Tested with Python {r.choice(['3.11.4', '3.12.1'])} and Node {r.randint(14, 22)}.{r.randint(0, 20)}.{r.randint(0, 9)}"),
    ("version_windows", lambda r: f"OS version 10.0.{r.randint(10000, 22631)}.{r.randint(100, 4000)}"),
    ("user_agent", lambda r: f"Mozilla/5.0 (X11; Linux x86_64) Chrome/{r.randint(100, 125)}.0.{r.randint(1000, 6999)}.{r.randint(10, 250)}"),
    ("npm_scoped", lambda r: f"npm install @types/node@{r.randint(14, 22)}.{r.randint(0, 9)}.{r.randint(0, 9)}"),
    ("localhost", lambda r: f'BASE_URL = "http://localhost:{r.choice([3000, 8000, 8080, 5173])}/api"'),
    ("loopback", lambda r: f"uvicorn app:app --host 127.0.0.1 --port {r.randint(1024, 9999)}"),
    ("bind_all", lambda r: f"server.bind(('0.0.0.0', {r.randint(1024, 65000)}))"),
    ("ipv6_loopback", lambda r: f'listen [::1]:{r.randint(80, 9000)};'),
    ("link_local", lambda r: f"inet6 fe80::{r.randint(1, 0xffff):x}:{r.randint(1, 0xffff):x}%eth0 scope link"),
    ("doc_ip", lambda r: f"# e.g. curl http://192.0.2.{r.randint(1, 254)}/health"),
    ("subnet_mask", lambda r: "netmask 255.255.255.0 broadcast 255.255.255.255"),
    ("oid", lambda r: f"snmpget -v2c public 1.3.6.1.2.1.1.{r.randint(1, 9)}.0"),
    ("mac", lambda r: "ether " + ":".join(_s(r, HEX, 2) for _ in range(6))),
    ("timestamp", lambda r: f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} {r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d},{r.randint(0, 999):03d} INFO tick"),
    ("epoch", lambda r: f"created_at = {r.randint(1_600_000_000, 1_800_000_000)}  # unix seconds"),
    ("epoch_ms", lambda r: f'{{"ts": {r.randint(1_600_000_000_000, 1_800_000_000_000)}, "level": "info"}}'),
    ("traceback", lambda r: f'  File "/srv/app/handlers.py", line {r.randint(10, 4000)}, in handle\n    return fn(*args)'),
    ("big_int", lambda r: f"user_id = {r.randint(10**9, 10**10 - 1)}"),
    ("isbn", lambda r: f"ISBN 978-{r.randint(0, 9)}-{r.randint(10, 99)}-{r.randint(100000, 999999)}-{r.randint(0, 9)}"),
    ("price", lambda r: f"total: ${r.randint(1, 999)},{r.randint(100, 999)},{r.randint(100, 999)}.{r.randint(10, 99)}"),
    ("date_range", lambda r: f"between 2023-{r.randint(1, 12):02d}-01 and 2024-{r.randint(1, 12):02d}-28"),
    ("float_list", lambda r: "weights = [" + ", ".join(f"{r.random():.6f}" for _ in range(4)) + "]"),
    ("order_id", lambda r: f"ORD-{r.randint(2019, 2024)}-{r.randint(100000, 999999)}"),
    ("port_range", lambda r: f"ports: {r.randint(1000, 5000)}-{r.randint(5001, 9000)}"),
    ("slice", lambda r: f"chunk = data[{r.randint(0, 99)}:{r.randint(100, 999)}:{r.randint(1, 9)}]"),
    ("clock", lambda r: f"elapsed {r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}.{r.randint(0, 999):03d}"),
    ("sum_list", lambda r: "def sum_list(xs: list[int]) -> int:\n    return sum(xs)"),
    ("square", lambda r: f"def square(n: int) -> int:\n    return n * n\n\nassert square({r.randint(2, 9)}) > 0"),
    ("index", lambda r: "head = xs[0]\ntail = xs[1:]\nmid = xs[len(xs) // 2]"),
    ("fib", lambda r: "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a"),
    ("matmul", lambda r: "y = x@self.weight.T + self.bias\nz = a @ b"),
    ("decorators", lambda r: '@app.route("/users/<int:user_id>")\n@login_required\ndef show(user_id): ...'),
    ("cpp", lambda r: "std::vector<std::string> names;\nstd::map<int, int> counts;"),
    ("rust", lambda r: "use crate::config::Settings;\nlet v: Vec<u8> = Vec::with_capacity(64);"),
    ("git_remote", lambda r: f"git remote add origin git@github.com:{r.choice(_NAMES)}/{r.choice(_WORDS)}.git"),
    ("retina_asset", lambda r: f'<img src="icons/{r.choice(_WORDS)}@2x.png">'),
    ("docker_digest", lambda r: f"FROM python@sha256:{_s(r, HEX, 64)}"),
    ("css_media", lambda r: f"@media (max-width: {r.randint(300, 1200)}px) {{ .nav {{ display: none; }} }}"),
    ("sql_param", lambda r: "SELECT * FROM orders WHERE customer_id = @customerId AND total > @minTotal"),
    ("password_none", lambda r: r.choice(["password=None", "password = None", "def login(user, password=None):"])),
    ("password_env", lambda r: f'password = os.environ["{r.choice(["DB_PASSWORD", "PGPASSWORD", "SMTP_PASS"])}"]'),
    ("password_getenv", lambda r: 'SECRET_KEY = os.getenv("DJANGO_SECRET_KEY")'),
    ("password_settings", lambda r: "api_key = settings.OPENAI_API_KEY"),
    ("password_getpass", lambda r: 'password = getpass.getpass("Password: ")'),
    ("password_type", lambda r: r.choice(["password: str", "password: Optional[str] = None", "secret: SecretStr"])),
    ("password_param", lambda r: "def check_password(self, raw_password: str) -> bool:\n    return verify(raw_password, self.password_hash)"),
    ("password_placeholder", lambda r: r.choice(["API_KEY=<your-api-key>", "PASSWORD=changeme", 'api_key = "YOUR_API_KEY_HERE"',
                                                "SECRET_KEY=${SECRET_KEY}", 'password: "{{ vault_db_password }}"',
                                                "password: ********", 'token = "xxxxxxxxxxxxxxxx"'])),
    ("password_empty", lambda r: r.choice(['password = ""', "DB_PASSWORD=", "password: ''"])),
    ("password_schema", lambda r: '"password": {"type": "string", "minLength": 8, "format": "password"}'),
    ("password_validators", lambda r: "AUTH_PASSWORD_VALIDATORS = [\n    {\"NAME\": \"django.contrib.auth.password_validation.MinimumLengthValidator\"},\n]"),
    ("password_settings_int", lambda r: f"PASSWORD_RESET_TIMEOUT = {r.randint(600, 259200)}\nPASSWORD_MIN_LENGTH = 12"),
    ("password_ui", lambda r: 'password_label = "Enter your password"\npassword_help = "At least 12 characters."'),
    ("password_compare", lambda r: "if password != confirm_password:\n    raise ValidationError(\"Passwords do not match\")"),
    ("password_prose", lambda r: "Forgot your password? Reset it from the account page."),
    ("secret_ref", lambda r: f"  secretName: {r.choice(_WORDS)}-tls\n  secretKeyRef:\n    name: db-credentials\n    key: password"),
    ("token_code", lambda r: "tokens = tokenizer.encode(text)\ntoken = tokens[0]\nnext_token = model.generate(tokens)"),
    ("token_special", lambda r: 'eos_token = "<|endoftext|>"\npad_token = "[PAD]"'),
    ("gh_actions", lambda r: "      - uses: actions/checkout@v4\n        with:\n          token: ${{ secrets.GITHUB_TOKEN }}"),
    ("publishable_key", lambda r: f'stripe.setPublishableKey("pk_live_{_s(r, ALNUM, 24)}");'),
    ("data_uri", lambda r: f'<img src="data:image/png;base64,iVBORw0KGgo{_s(r, B64, 80)}=">'),
    ("webpack_chunk", lambda r: f'<script src="/static/js/main.{_s(r, HEX, 8)}.chunk.js"></script>'),
    ("long_identifier", lambda r: "class AbstractSingletonProxyFactoryBeanRegistryPostProcessor(BaseProcessor): pass"),
    ("constant_names", lambda r: "MAX_RETRY_ATTEMPTS_BEFORE_CIRCUIT_BREAKER_OPENS = 5\nDEFAULT_CONNECTION_POOL_SIZE = 10"),
    ("arn", lambda r: f"arn:aws:iam::{r.randint(10**11, 10**12 - 1)}:role/{r.choice(_WORDS)}-deployer"),
    ("s3_path", lambda r: f"s3://{r.choice(_WORDS)}-artifacts/builds/{_s(r, HEX, 12)}/app.zip"),
    ("jwt_header_only", lambda r: 'JWT_HEADER = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"  # {"alg":"HS256","typ":"JWT"}'),
    ("base64_config", lambda r: f'checksum: "{_s(r, B64, 44)}"'),
    ("test_fixture", lambda r: f'def test_hash_is_stable():\n    assert digest(b"abc") == "{_s(r, HEX, 64)}"'),
    ("cli_help", lambda r: "  --password TEXT   Password for the database (default: read from $PGPASSWORD)"),
    ("url_no_creds", lambda r: f"https://github.com/{r.choice(_NAMES)}/{r.choice(_WORDS)}/blob/main/src/app.py#L{r.randint(1, 999)}"),
    ("url_template_creds", lambda r: 'DATABASE_URL = f"postgres://{user}:{password}@{host}:5432/{name}"'),
    ("arithmetic", lambda r: f"x = {r.randint(100, 999)} * {r.randint(1000, 9999)} - {r.randint(1000, 9999)}"),
    ("semver_range", lambda r: f'"dependencies": {{"react": "^{r.randint(16, 18)}.{r.randint(0, 9)}.{r.randint(0, 9)}", "vite": "~5.{r.randint(0, 4)}.{r.randint(0, 9)}"}}'),
    ("hex_literal", lambda r: f"ptr = 0x{_s(r, HEX, 12)}  # at {_s(r, HEX, 8)}"),
    ("email_like_words", lambda r: f"ping @{r.choice(_NAMES)} about the deploy; see foo@bar (not a host)"),
    ("public_key", lambda r: f"-----BEGIN PUBLIC KEY-----\n{_s(r, B64, 64)}\n{_s(r, B64, 24)}==\n-----END PUBLIC KEY-----"),
    ("certificate", lambda r: f"-----BEGIN CERTIFICATE-----\n{_s(r, B64, 64)}\n{_s(r, B64, 64)}\n-----END CERTIFICATE-----"),
    ("ssh_public_key", lambda r: f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{_s(r, B64, 43)} ci@build-runner"),
    ("ansible_vault", lambda r: f"db_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  {_s(r, HEX, 64)}"),
    ("erb_secret", lambda r: 'secret_key_base: <%= ENV["SECRET_KEY_BASE"] %>'),
    ("shell_default", lambda r: 'PASSWORD="${DB_PASSWORD:-}"'),
    ("password_field_name", lambda r: 'PASSWORD_FIELD = "password"\nUSERNAME_FIELD = "email"'),
    ("password_regex", lambda r: "const PASSWORD_PATTERN = /^(?=.*[A-Z])(?=.*\\d).{12,}$/;"),
    ("api_key_header", lambda r: 'api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False)'),
    ("pbkdf2", lambda r: f'dk = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, {r.choice([100_000, 600_000])})'),
    ("js_env", lambda r: "const apiKey = process.env.API_KEY ?? '';\nif (!apiKey) throw new Error('missing key');"),
    ("coordinates", lambda r: f"lat, lng = {r.uniform(-80, 80):.6f}, {r.uniform(-170, 170):.6f}"),
    ("http_date", lambda r: f"Date: Mon, {r.randint(10, 28)} Jan 2024 12:30:45 GMT\nContent-Length: {r.randint(100000, 9999999)}"),
    ("semver_build", lambda r: f"version: 1.{r.randint(0, 9)}.{r.randint(0, 9)}+build.{r.randint(100, 999)}"),
    ("hex_colors", lambda r: "palette = [" + ", ".join(f'"#{_s(r, HEX, 6)}"' for _ in range(4)) + "]"),
    ("big_literal", lambda r: f"population = {r.randint(1, 9)}_{r.randint(100, 999)}_{r.randint(100, 999)}_{r.randint(100, 999)}"),
    ("phone_validator", lambda r: 'PHONE_RE = re.compile(r"^\\+?[1-9]\\d{1,14}$")  # E.164'),
    ("login_test", lambda r: 'response = client.post("/login", data={"username": "u", "password": ""})'),
)


def _negative_sample(rng: random.Random, index: int) -> Sample:
    label, template = _NEGATIVE_TEMPLATES[index % len(_NEGATIVE_TEMPLATES)]
    b = _Builder()
    _wrap(rng, b, lambda b: b.add(template(rng)))
    return b.sample(f"negative/{label}")


# --------------------------------------------------------------------------- #
# The corpus                                                                   #
# --------------------------------------------------------------------------- #

_POSITIVE_COUNTS = {
    "api_key": 80,
    "token": 80,
    "aws_secret": 10,
    "private_key": 25,
    "password": 80,
    "url_credentials": 30,
    "email": 40,
    "phone": 40,
    "ip_address": 40,
    "signature": 10,
}
_NEGATIVE_COUNT = 4 * len(_NEGATIVE_TEMPLATES)


def _positive_sample(rng: random.Random, family: str, index: int) -> Sample:
    if family in ("api_key", "token"):
        table = _API_KEYS if family == "api_key" else _TOKENS
        name, make = table[index % len(table)]
        return _secret_in_context(rng, family, name, make(rng))
    makers: dict[str, Callable[[random.Random], Sample]] = {
        "aws_secret": _aws_secret_sample,
        "private_key": _private_key_sample,
        "password": _password_sample,
        "url_credentials": _url_credentials_sample,
        "email": _email_sample,
        "phone": _phone_sample,
        "ip_address": _ip_sample,
        "signature": _signature_sample,
    }
    return makers[family](rng)


def planted_corpus(seed: int = 0) -> list[Sample]:
    """Positives (one or more planted spans each) and hard negatives, shuffled."""
    rng = random.Random(seed)
    samples = [
        _positive_sample(rng, family, i)
        for family, count in _POSITIVE_COUNTS.items()
        for i in range(count)
    ]
    samples += [_negative_sample(rng, i) for i in range(_NEGATIVE_COUNT)]
    rng.shuffle(samples)
    return samples
