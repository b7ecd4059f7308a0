"""Plugin arguments are parsed with Go `flag` rules (Volcano: flag.NewFlagSet(..., ContinueOnError))."""

from __future__ import annotations

import pytest

from statemachines.plugins.args import Flag, parse_flags, parse_go_int, split_list

FLAGS = (
    Flag("master", "string", "master"),
    Flag("port", "int", 23456),
    Flag("enabled", "bool", False),
    Flag("inject", "bool", True),
)


@pytest.mark.parametrize(
    ("args", "values", "error"),
    [
        pytest.param(["--master=boss"], {"master": "boss"}, "", id="double_dash_equals_sets_flag"),
        pytest.param(["-master=boss"], {"master": "boss"}, "", id="single_dash_same_as_double_dash"),
        pytest.param(["-master", "-boss"], {"master": "-boss"}, "", id="non_bool_flag_consumes_next_element_even_with_dash"),
        pytest.param(["-enabled"], {"enabled": True}, "", id="bare_bool_flag_is_true"),
        pytest.param(["-inject=false"], {"inject": False}, "", id="bool_flag_equals_false"),
        pytest.param(["-inject", "false", "-port=1"], {"inject": True, "port": 23456}, "", id="bool_flag_space_false_is_true_and_stops"),
        pytest.param(["-enabled=T"], {"enabled": True}, "", id="go_parsebool_accepts_T"),
        pytest.param(["-port=023456"], {"port": 0o23456}, "", id="leading_zero_is_octal"),
        pytest.param(["-port=0x10"], {"port": 16}, "", id="hex_prefix"),
        pytest.param(["-port=1_000"], {"port": 1000}, "", id="underscore_between_digits"),
        pytest.param(["master", "-port=1"], {"port": 23456}, "", id="non_dash_element_stops_parsing"),
        pytest.param(["-", "-port=1"], {"port": 23456}, "", id="lone_dash_stops_parsing"),
        pytest.param(["", "-port=1"], {"port": 23456}, "", id="empty_element_stops_parsing"),
        pytest.param(["--", "-port=1"], {"port": 23456}, "", id="double_dash_terminates"),
        pytest.param(["-port=1", "-port=2"], {"port": 2}, "", id="last_occurrence_wins"),
        pytest.param(["---x"], {}, "bad flag syntax: ---x", id="three_dashes_bad_syntax"),
        pytest.param(["-=x"], {}, "bad flag syntax: -=x", id="dash_equals_bad_syntax"),
        pytest.param(["-nope"], {}, "flag provided but not defined: -nope", id="unknown_flag"),
        pytest.param(["-h"], {}, "flag: help requested", id="help_flag"),
        pytest.param(["-port=abc"], {}, 'invalid value "abc" for flag -port: parse error', id="bad_int"),
        pytest.param(["-port=99999999999999999999"], {}, 'invalid value "99999999999999999999" for flag -port: value out of range', id="int_out_of_range"),
        pytest.param(["-enabled=yes"], {}, 'invalid boolean value "yes" for -enabled: parse error', id="bad_bool"),
        pytest.param(["-port"], {}, "flag needs an argument: -port", id="missing_value"),
        pytest.param(["-master=a", "-nope", "-port=1"], {"master": "a", "port": 23456}, "flag provided but not defined: -nope", id="flags_before_error_kept_after_error_default"),
    ],
)
def test_go_flag_semantics(args, values, error):
    parsed = parse_flags(args, FLAGS)
    assert parsed.error == error
    for name, value in values.items():
        assert parsed.values[name] == value


def test_none_args_give_defaults():
    assert parse_flags(None, FLAGS).values == {"master": "master", "port": 23456, "enabled": False, "inject": True}


@pytest.mark.parametrize("text", ["0b", "0x", "08", "1__0", "_1", "1_", "+"])
def test_go_parseint_rejects(text):
    with pytest.raises(ValueError):
        parse_go_int(text)


def test_split_list_trims_dedupes_and_drops_empties():
    assert split_list(" a, b,,a ,c ") == ["a", "b", "c"]
