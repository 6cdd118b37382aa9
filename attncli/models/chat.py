"""A prompt put in a model's chat template (tokenizer_config.json's chat_template, a GGUF's
tokenizer.chat_template), as transformers' apply_chat_template renders it: Jinja2 in its
ImmutableSandboxedEnvironment (no attribute of Python's internals reached, nothing changed,
ranges of 100,000 at most), trim_blocks and lstrip_blocks on, with messages = [the user's
prompt], add_generation_prompt true, the model's bos_token and eos_token, and
raise_exception. The text it renders is read as it is made and refused past TEXT_MOST
characters, so that a template cannot make one of gigabytes. jinja2 is the optional extra
`chat`.
"""

from __future__ import annotations

from attncli.errors import ModelError

TEXT_MOST = 1_000_000  # characters a rendered prompt may have
TEMPLATE_MOST = 1_000_000  # characters of a template: Llama 3.1's, among the largest, is 4,000


def template_of(raw, where: str) -> str | None:
    """The chat template a file declares (`raw`: a string, or a list of {"name", "template"}
    of which "default" is taken, as transformers takes it), or None; `where` names the file."""
    if raw is None:
        return None
    if isinstance(raw, list):
        named = {entry.get("name"): entry.get("template") for entry in raw if isinstance(entry, dict)}
        raw = named.get("default")
    if not isinstance(raw, str) or len(raw) > TEMPLATE_MOST:
        raise ModelError(f"{where}: its chat_template is not a template (a string of {TEMPLATE_MOST:,} characters at "
                         "most, or a list of them named, one \"default\")")
    return raw


def render(template: str, prompt: str, *, bos: str | None, eos: str | None, where: str) -> str:
    """`prompt` as the user's message in `template`, with the generation prompt after it."""
    try:
        from jinja2 import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise ModelError("--chat renders the model's chat template with jinja2, which is not installed; install it "
                         "with: pip install jinja2") from None

    def raise_exception(message):
        raise TemplateError(str(message))

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    try:
        made, size = [], 0
        for part in env.from_string(template).generate(messages=[{"role": "user", "content": prompt}],
                                                       add_generation_prompt=True, bos_token=bos or "",
                                                       eos_token=eos or ""):
            size += len(part)
            if size > TEXT_MOST:
                raise ModelError(f"{where}: its chat template makes a prompt of more than {TEXT_MOST:,} characters; "
                                 "give the model's own template, or leave out --chat")
            made.append(part)
    except ModelError:
        raise
    except Exception as e:  # noqa: BLE001: a template's syntax, a name it lacks, the sandbox's refusal, its own raise
        raise ModelError(f"{where}: its chat template cannot be rendered ({type(e).__name__}: "
                         f"{' '.join(str(e).split())[:200]}); give the model's own template, or leave out --chat"
                         ) from None
    return "".join(made)
