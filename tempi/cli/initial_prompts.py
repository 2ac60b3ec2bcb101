"""The prompts a command line brings: messages, @file attachments and piped stdin, combined
as pi combines them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tempi.agent.messages import ImageContent
from tempi.cli.errors import UserError
from tempi.cli.file_args import FileArgError, read_file_args, split_file_args


def initial_prompts(
    args: argparse.Namespace, cwd: Path, *, read_stdin: bool
) -> tuple[list[str], list[ImageContent]]:
    """pi's rule: piped stdin, then @file text, then the first message form the first
    prompt; every further message is a prompt of its own. Images go with the first."""
    messages, files = split_file_args(list(args.messages))
    try:
        attached = read_file_args(files, cwd)
    except FileArgError as err:
        raise UserError(str(err)) from err
    piped = sys.stdin.read() if read_stdin and not sys.stdin.isatty() else ""
    first = "".join(
        part for part in (piped if piped.strip() else "", attached.text, messages[0] if messages else "")
    )
    prompts = ([first] if first.strip() or attached.images else []) + messages[1:]
    return prompts, attached.images


def opens_interactive(args: argparse.Namespace) -> bool:
    """pi's rule: without -p or a machine mode, a terminal gets the interactive mode, with
    or without prompts on the command line (they are sent in it). Input from a pipe, or
    output to one, gets the answer printed instead."""
    return (
        not args.print_mode
        and args.mode == "text"
        and sys.stdin.isatty()
        and (not args.messages or sys.stdout.isatty())
    )
