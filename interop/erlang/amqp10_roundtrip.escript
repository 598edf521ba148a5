#!/usr/bin/env escript
%%! -noshell
%% A round trip with Erlang's amqp10_client (RabbitMQ's AMQP 1.0 client library, shipped as a
%% plugin inside Debian's rabbitmq-server package; no RabbitMQ server runs):
%%
%%   escript amqp10_roundtrip.escript HOST PORT ADDRESS COUNT
%%
%% Opens one connection (SASL ANONYMOUS), sends COUNT messages to ADDRESS (body <<"message N">>,
%% subject "erlang", application property n = N, durable), waits for each outcome, then attaches a
%% receiver to ADDRESS, grants COUNT credits and accepts what arrives. One JSON object per line:
%%   {"event":"settled","n":N,"state":"accepted"}  {"event":"message","n":N,"body":"...","subject":"...","n_prop":N}
%%   {"event":"summary","sent":S,"accepted":A,"received":R}   {"event":"error","description":"..."}
%% Exit 0 when all COUNT were accepted and received, 1 otherwise, 2 on an error, 64 on bad usage.
%% The library's code is found under /usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins
%% (or $RABBITMQ_PLUGINS_DIR).

-define(WAIT, 15000).

main([Host, Port, Address, Count]) ->
    try run(Host, list_to_integer(Port), list_to_binary(Address), list_to_integer(Count)) of
        Rc -> halt(Rc)
    catch Class:Reason ->
        emit([{event, <<"error">>}, {description, iolist_to_binary(io_lib:format("~p:~p", [Class, Reason]))}]),
        halt(2)
    end;
main(_) ->
    io:format(standard_error, "usage: amqp10_roundtrip.escript HOST PORT ADDRESS COUNT~n", []),
    halt(64).

plugin_dirs() ->
    Base = case os:getenv("RABBITMQ_PLUGINS_DIR") of
               false -> lists:last(lists:sort(filelib:wildcard("/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins")));
               Dir -> Dir
           end,
    [filename:join(D, "ebin") || D <- filelib:wildcard(filename:join(Base, "amqp10_c*"))].

run(Host, Port, Address, Count) ->
    [true = code:add_patha(D) || D <- plugin_dirs()],
    {ok, _} = application:ensure_all_started(amqp10_client),
    {ok, Conn} = amqp10_client:open_connection(#{address => Host, port => Port, sasl => anon,
                                                 container_id => <<"hermod-erlang-interop">>,
                                                 hostname => list_to_binary(Host)}),
    ok = await({amqp10_event, {connection, Conn, opened}}),
    {ok, Session} = amqp10_client:begin_session_sync(Conn),
    {ok, Sender} = amqp10_client:attach_sender_link_sync(Session, <<"erlang-sender">>, Address),
    ok = await({amqp10_event, {link, Sender, credited}}),
    Accepted = length([ok || N <- lists:seq(0, Count - 1), send(Sender, N) =:= accepted]),
    {ok, Receiver} = amqp10_client:attach_receiver_link(Session, <<"erlang-receiver">>, Address, unsettled),
    ok = await({amqp10_event, {link, Receiver, attached}}),
    ok = amqp10_client:flow_link_credit(Receiver, Count, never),
    Received = receive_all(Receiver, 0, Count),
    emit([{event, <<"summary">>}, {sent, Count}, {accepted, Accepted}, {received, Received}]),
    ok = amqp10_client:close_connection(Conn),
    case Accepted =:= Count andalso Received =:= Count of true -> 0; false -> 1 end.

send(Sender, N) ->
    Tag = integer_to_binary(N),
    Msg0 = amqp10_msg:new(Tag, <<"message ", Tag/binary>>, false),
    Msg1 = amqp10_msg:set_properties(#{subject => <<"erlang">>}, Msg0),
    Msg2 = amqp10_msg:set_application_properties(#{<<"n">> => N}, Msg1),
    Msg = amqp10_msg:set_headers(#{durable => true}, Msg2),
    ok = amqp10_client:send_msg(Sender, Msg),
    State = receive {amqp10_disposition, {S, Tag}} -> S after ?WAIT -> timeout end,
    emit([{event, <<"settled">>}, {n, N}, {state, atom_to_binary(State)}]),
    State.

receive_all(_Receiver, Got, Count) when Got =:= Count ->
    Got;
receive_all(Receiver, Got, Count) ->
    receive
        {amqp10_msg, Receiver, Msg} ->
            ok = amqp10_client:accept_msg(Receiver, Msg),
            Body = iolist_to_binary(amqp10_msg:body(Msg)),
            Subject = maps:get(subject, amqp10_msg:properties(Msg), null),
            NProp = maps:get(<<"n">>, amqp10_msg:application_properties(Msg), null),
            emit([{event, <<"message">>}, {n, Got}, {body, Body}, {subject, Subject}, {n_prop, NProp},
                  {durable, maps:get(durable, amqp10_msg:headers(Msg), false)}]),
            receive_all(Receiver, Got + 1, Count)
    after ?WAIT ->
        emit([{event, <<"timeout">>}, {seconds, ?WAIT div 1000}]),
        Got
    end.

await(Event) ->
    receive
        Event -> ok;
        {amqp10_event, {_, _, {closed, Why}}} = Other -> error({unexpected, Other, Why})
    after ?WAIT -> error({timeout_waiting_for, Event})
    end.

%% A flat JSON object from [{Key, Value}] with binaries, integers, booleans and null.
emit(Fields) ->
    Pairs = [[$", atom_to_list(K), $", $:, json(V)] || {K, V} <- Fields],
    io:format("{~s}~n", [lists:join(",", Pairs)]).

json(V) when is_integer(V) -> integer_to_list(V);
json(V) when V =:= true; V =:= false; V =:= null -> atom_to_list(V);
json(V) when is_binary(V) -> [$", escape(V), $"];
json(V) -> json(iolist_to_binary(io_lib:format("~p", [V]))).

escape(Bin) ->
    [case C of $" -> "\\\""; $\\ -> "\\\\"; _ when C < 32 -> io_lib:format("\\u~4.16.0b", [C]); _ -> C end
     || <<C/utf8>> <= Bin].
