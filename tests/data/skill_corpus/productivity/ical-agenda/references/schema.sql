create table if not exists events (
    uid text primary key,
    starts_at text not null,
    summary text not null,
    calendar text not null
);
create index if not exists events_by_start on events (starts_at);
