"""``unpooled user add NAME --role organiser|submitter|annotator [--team T]``: make an account."""

from __future__ import annotations

import json
import sys

from ..main import CommandError, Exit, setup_django



def register(sub) -> None:
    u = sub.add_parser("user", help="make accounts (organisers, submitters, annotators)",
                       description="Accounts of the local service (the database of $DATABASE_URL or "
                                   "$UNPOOLED_DATA_DIR).")
    us = u.add_subparsers(dest="user_command", metavar="ACTION")
    us.required = True
    a = us.add_parser("add", help="make an account with a role (and a team for a submitter)",
                      description="Make an account. Organisers run corpora and the console (and the admin); "
                                  "submitters submit runs for their team; annotators label. The password is "
                                  "generated and printed once, unless --password-stdin reads it from standard "
                                  "input (it must pass the site's password rules).")
    a.add_argument("name", metavar="NAME", help="the user name to sign in with (letters, digits, @ . + - _)")
    a.add_argument("--role", required=True, metavar="ROLE",
                   help="organiser, submitter (a member of a team, who submits its runs; 'participant' is taken too) or annotator")
    a.add_argument("--team", metavar="T", default="",
                   help="the submitter's team (an existing team, or a new one with --create-team)")
    a.add_argument("--create-team", action="store_true", help="make the team named by --team if it does not exist")
    a.add_argument("--password-stdin", "--password", dest="password_stdin", action="store_true",
                   help="read the password from standard input (first line) instead of generating one")
    a.add_argument("--email", default="", help="an e-mail address for the account (optional)")
    a.add_argument("--json", action="store_true", help="print the account as JSON (with the password)")
    a.set_defaults(func=cmd_add)


def cmd_add(args) -> int:
    password = None
    if args.password_stdin:
        line = sys.stdin.readline(4096)  # a password: bounded, whatever is piped in
        password = line.rstrip("\r\n")
        if not password:
            raise CommandError("--password-stdin: standard input gave no password (an empty first line)")
    setup_django()
    from unpooled.service.accounts.actions import AccountError, do_add_user

    try:
        user, pw = do_add_user(args.name, args.role, team=args.team, create_team=args.create_team,
                               password=password, email=args.email)
    except AccountError as exc:
        raise CommandError(str(exc)) from None
    from unpooled.service.accounts.actions import role_of
    from unpooled.service.accounts.models import Profile

    prof = Profile.objects.filter(user=user).select_related("team").first()
    team = prof.team if prof else None  # an annotator's too: the team they never label
    if args.json:
        print(json.dumps({"username": user.username, "role": role_of(user), "team": team.name if team else None,
                          "password": None if password is not None else pw}))
        return Exit.OK
    print(f"made {role_of(user)} {user.username}" + (f" in team {team.name}" if team else ""))
    if password is None:
        print(f"password: {pw}")
        print("(shown once: pass it on safely)", file=sys.stderr)
    return Exit.OK
